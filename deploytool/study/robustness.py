"""`deploytool study robustness`: does migration or quantization change a model's adversarial robustness?

Adversarial sets are crafted on each PC model (the Keras and PyTorch twins, or a user's .keras / .pt2 file with
its --data test.npz) with ART in pixel space (attacks.py),
stored by content hash, and each set — plus the clean samples — runs through every combination `migrate` would
run for the same request: the same matrix (plan_matrix), context, conversion cache, runtimes and sessions (one
browser for the web rows) via `run_combination`. The sets a row needs run as one stacked test set in one call per
row (robust_sets.py), while conversions start in their own workers as crafting begins. Every set also runs through each
PC model (the row's baseline): so every set is white-box for one twin's rows and a transfer attack for the
other's. A point is stored per (set, row) with its predicted labels; the report (robust_report.py) computes
every number from those. Resuming skips stored points and crafts nothing already crafted. Quantized rows
(fp16, dynamic, int8, int8-io) are migrate's: calibrated on the clean calibration set, never on a crafted one, and
an int8-io model's inputs quantized by its runtime.
"""

from __future__ import annotations

import time
from dataclasses import field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from deploytool.artifact import array_sha256
from deploytool.convert.lanes import ConversionLanes
from deploytool.errors import UnknownOption
from deploytool.migrate import prepare
from deploytool.provenance import host_identity, package_version
from deploytool.report.png import thumbnail_uri
from deploytool.run import usermodel
from deploytool.run.context import Source
from deploytool.run.flags import (
    floats,
    format_words,
    positive_int,
    quantize_words,
    target_words,
    user_model_args,
    user_model_fields,
)
from deploytool.run.request import MigrateRequest
from deploytool.run.runner import conversions_ahead, run_combination
from deploytool.study.attacks import (
    ATTACKS,
    DEFAULT_EPS,
    AttackSpec,
    Crafter,
    attack_grid,
    load_or_craft,
    to_model_input,
)
from deploytool.study.base import StudyRun, register_study
from deploytool.study.report import write_study_report
from deploytool.study.robust_report import report as sections
from deploytool.study.robust_sets import CraftedSet, SetPlan, Stack, group_by_sets, pc_baseline
from deploytool.targets import target_flags
from deploytool.value import value
from deploytool.workspace import Workspace, stable_hash

HELP = ("adversarial robustness before and after migration: FGSM, PGD (L∞) and DeepFool crafted on each PC model, "
        "run on every migrated artifact and target")
EXAMPLES = ("deploytool study robustness --model lenet5 --target host --format tflite --quantize none,int8",
            "deploytool study robustness --model my.keras --data test.npz --scale 0.00392157 --target host,web",
            "deploytool study robustness --target host,web --format all --quantize all --samples 500",
            "deploytool study robustness --attack fgsm --eps 0.1,0.3 --samples 64")
DEFAULT_SAMPLES = 500
GALLERY_PER_ROW = 3


# a user's model file: only a framework's own model has the gradients an attack needs
CRAFTABLE = ("keras", "torch")


def add_cli(p: Any) -> None:
    p.add_argument("--target", default="host", help=f"{target_words()} (comma-separated, or all; default: host)")
    p.add_argument("--format", default="all",
                   help=f"as for migrate: {format_words(notes=False)} (comma-separated, or all)")
    p.add_argument("--quantize", default="all", help=f"as for migrate: {quantize_words()} (or all)")
    p.add_argument("--runtime", default="", help="as for migrate: which runtime where a target offers several")
    user_model_args(p)
    for target in target_flags():
        target.add_cli_options(p)
    p.add_argument("--attack", default="all", help=f"{', '.join(ATTACKS)} (comma-separated, or all; default: all)")
    p.add_argument("--eps", default=",".join(f"{e:g}" for e in DEFAULT_EPS),
                   help="L∞ budgets on the [0, 1] pixel scale, before normalisation (default: 0.05,0.1,0.2,0.3)")
    p.add_argument("--samples", type=positive_int, default=DEFAULT_SAMPLES,
                   help=f"the first N test samples are attacked (default: {DEFAULT_SAMPLES})")
    p.add_argument("--threads", type=positive_int, default=1, help="inference threads on every runtime (default: 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one combination may run (default: 600)")


@value(frozen=False)
class RobustnessRequest:
    """What runs is migrate's request (model, matrix, data, threads, run id); what is attacked is this study's own."""
    migrate: MigrateRequest = field(default_factory=MigrateRequest)
    attacks: tuple[str, ...] = ("all",)
    eps: tuple[float, ...] = DEFAULT_EPS
    samples: int = DEFAULT_SAMPLES

    def __post_init__(self) -> None:
        # Latency is not this study's question: no warm-up, one timed sample per row.
        self.migrate = replace(self.migrate, warmup_runs=0, latency_samples=1)

    def attack_specs(self) -> list[AttackSpec]:
        names = tuple(ATTACKS) if "all" in self.attacks else self.attacks
        return attack_grid(names, tuple(self.eps))


@value(frozen=False)
class RobustnessOutcome:
    run_id: str
    report_paths: Any
    rows_measured: int
    rows_reused: int
    sets_crafted: int
    sets_reused: int
    seconds_crafting: float
    seconds_running: float  # in the rows' calls: conversions not yet done when a row came, loads, runs
    seconds_total: float
    seconds_converting: float = 0.0  # rows waiting for conversions (the rest overlapped crafting)
    seconds_in_runtimes: dict[str, float] = field(default_factory=dict)  # target -> load + run of its rows


def request_from_args(args: Any) -> RobustnessRequest:
    """The request the command's flags describe (bench/bench_robustness.py builds the same one)."""

    migrate = MigrateRequest(
        model=args.model, frameworks=(args.framework,), formats=(args.format,), quantize=(args.quantize,),
        targets=(args.target,), target_options={t.name: o for t in target_flags() if (o := t.options_from_cli(args))},
        runtimes=(args.runtime,) if args.runtime else (), data_dir=args.data_dir, epochs=args.epochs,
        threads=args.threads, timeout_s=args.timeout, run_id=args.run_id, fresh=args.fresh, **user_model_fields(args))
    return RobustnessRequest(migrate, attacks=tuple(a.strip() for a in args.attack.split(",") if a.strip()),
                             eps=floats(args.eps, "--eps"), samples=args.samples)


@register_study("robustness")
def run(args: Any) -> int:
    out = robustness(request_from_args(args), args.workspace, args.db, progress=not args.quiet)
    print(f"run {out.run_id}: {out.rows_measured} rows measured, {out.rows_reused} reused; "
          f"{out.sets_crafted} adversarial sets crafted ({out.seconds_crafting:.0f} s), {out.sets_reused} reused; "
          f"{out.seconds_total:.0f} s in all")
    if out.report_paths is not None:
        print(f"report: {out.report_paths.html}")
    return 0


def report(srun: Any) -> list:
    """The study's report sections from its stored points (`deploytool report RUN`; robust_report.py)."""

    return sections(srun)


def _thumbnails(x01: np.ndarray, indices: list[int], captions: list[str]) -> list[list[Any]]:
    out = []
    for i, caption in zip(indices, captions):
        img = x01[i]
        uri, w, h = thumbnail_uri(img[..., 0] if img.shape[-1] == 1 else img, 56)
        out.append([uri, w, h, caption])
    return out


def robustness(req: RobustnessRequest, workspace: str | Path | None = None, db_url: str | None = None,
               progress: bool = True, log: Callable[[str], None] = print) -> RobustnessOutcome:
    """The robustness study: craft each attack's set once per framework, stack the sets so every row loads its
    model once, run the matrix on the stack, and keep each (set, row) point as it is measured (resumable).

    Long: one run's life cycle — the progress bar, the conversion lanes started ahead and the interrupt that
    must mark the run `interrupted` span every step, so the steps stay in one function."""
    from tqdm import tqdm

    t_start = time.perf_counter()
    if usermodel.is_model_file(req.migrate.model):
        fmt = usermodel.source_format(Path(req.migrate.model))
        if fmt not in CRAFTABLE:
            raise UnknownOption(f"{req.migrate.model}: attacks need the model's gradients, which a {fmt} model does "
                                "not give; pass the .keras or .pt2 model it was converted from")
    specs = req.attack_specs()
    ws = Workspace.open(workspace)
    ctx, combos, _, keys = prepare(req.migrate, ws, progress)
    frameworks = sorted({c.framework for c in combos})
    n = min(req.samples, len(ctx.dataset.x_test))
    clean_x = ctx.dataset.x_test[:n]
    y = ctx.dataset.y_test[:n]
    images = ctx.dataset.images(clean_x)
    if images is None:
        raise UnknownOption(f"{req.migrate.model}: attacks perturb images; this model takes named inputs")
    x01 = np.stack([images[i] for i in range(n)]).astype(np.float32)
    clean_sha = array_sha256(x01)
    request = {"spec": ctx.spec.content_hash(), "data": ctx.dataset.sha256, "samples": n, "clean_sha256": clean_sha,
               "sources": {fw: ctx.source_id(fw) for fw in frameworks}, "frameworks": frameworks,
               "formats": list(req.migrate.formats), "quantize": list(req.migrate.quantize),
               "targets": sorted(ctx.preflight), "target_options": req.migrate.target_options,
               "runtimes": list(req.migrate.runtimes),
               "attacks": [s.name for s in specs], "art": package_version("adversarial-robustness-toolbox"),
               "host": host_identity(), "identity": {t: ctx.identity(t) for t in sorted(ctx.preflight)}}
    srun = StudyRun.open("robustness", ctx.spec.name, request, ws.root, db_url, req.migrate.run_id, req.migrate.fresh)
    done = {k for k, v in srun.points().items() if v.get("final", True)}
    if "samples" not in done:
        srun.save("samples", {"n": n, "y": y.tolist(), "labels": list(ctx.spec.labels), "frameworks": frameworks})
    plans = [SetPlan("clean", None, None)] + [SetPlan(f"{fw}/{s.name}", fw, s) for fw in frameworks for s in specs]

    def row_key(plan_id: str, what: str) -> str:
        return f"row/{plan_id}/{what}"

    needed = {c: tuple(p.set_id for p in plans if row_key(p.set_id, keys[c]) not in done) for c in combos}
    pc_todo = {p.set_id: [fw for fw in frameworks if row_key(p.set_id, "pc-" + fw) not in done] for p in plans}
    groups = group_by_sets(needed, tuple(p.set_id for p in plans if pc_todo[p.set_id]))
    wanted = {s for sets in groups for s in sets}
    total = sum(len(v) for v in needed.values())
    times = {"crafting": 0.0, "converting": 0.0, "running": 0.0}
    by_target: dict[str, float] = {}
    measured = crafted = reused_sets = 0
    # ctx.source_model, not ctx.source: its baseline is for the whole test set, measured with this study's settings
    artifacts = {fw: ctx.source_model(fw) for fw in frameworks}
    crafters: dict[str, Crafter] = {}

    def make_crafter(fw: str) -> Crafter:
        return Crafter(artifacts[fw], ctx.spec.preprocess, ctx.spec.num_classes, req.migrate.threads)

    bar = tqdm(total=total, desc="robustness", unit="row", disable=not progress, dynamic_ncols=True)
    # conversions start in their own workers now and go on while the sets are crafted (the other core)
    converter = ConversionLanes(ws.root / "logs", srun.run_id, req.migrate.timeout_s)
    try:
        rows = [c for c in combos if needed[c]]
        for fw in frameworks:
            for fmt, quantize, out, calibration in conversions_ahead(ctx, rows, fw, artifacts[fw]):
                converter.prefetch(artifacts[fw], fmt, quantize, out, calibration)
        sets: dict[str, CraftedSet] = {}
        for plan in plans:
            if plan.set_id not in wanted:
                continue
            if plan.attack is None:
                sets[plan.set_id] = CraftedSet(plan, x01, clean_x, {"sha256": clean_sha, "seconds": 0.0,
                                                                    "cached": True})
            else:
                assert plan.crafted_on is not None  # an attack is crafted on one framework's model
                bar.set_postfix_str(f"crafting {plan.set_id}", refresh=True)
                adv01, facts = load_or_craft(ws, crafters, make_crafter, plan.crafted_on, artifacts[plan.crafted_on],
                                             x01, y, clean_sha, plan.attack)
                sets[plan.set_id] = CraftedSet(plan, adv01, to_model_input(adv01, ctx.spec.preprocess), facts)
                crafted += not facts["cached"]
                reused_sets += facts["cached"]
                times["crafting"] += facts["seconds"]
            if f"set/{plan.set_id}" not in done:
                cs = sets[plan.set_id]
                d = (cs.x01 - x01).reshape(n, -1)
                srun.save(f"set/{plan.set_id}", {
                    "crafted_on": plan.crafted_on, "attack": plan.attack.attack if plan.attack else "none",
                    "eps": plan.attack.eps if plan.attack else 0.0, "sha256": cs.facts["sha256"],
                    "path": cs.facts.get("path"), "seconds_crafting": cs.facts["seconds"],
                    "linf_mean": float(np.abs(d).max(1).mean()), "l2_mean": float(np.linalg.norm(d, axis=1).mean())})
        crafters.clear()  # the crafting models' memory is not the rows'
        with ctx.sessions():
            for set_ids, group in groups.items():
                stack = Stack(tuple(sets[i] for i in set_ids), n)
                ds = stack.dataset(ctx.dataset, y, ctx.spec.layout)
                out_dir = ws.inside(ws.root / "outputs" / srun.run_id / "pc" / ds.sha256[:16])
                sources, pc_preds = {}, {}
                for fw in frameworks:
                    b = pc_baseline(ctx, fw, artifacts[fw], ds, out_dir)
                    sources[fw] = Source(fw, artifacts[fw], b)
                    pc_preds[fw] = stack.split(b.predictions)
                    for set_id in set_ids:
                        if fw in pc_todo[set_id]:
                            srun.save(row_key(set_id, "pc-" + fw), {
                                "set": set_id, "kind": "source", "framework": fw, "label": f"{fw} (PC)",
                                "status": "measured", "preds": pc_preds[fw][set_id].tolist()})
                stack_ctx = replace(ctx, dataset=ds, sources=sources)
                for combo in group:
                    bar.set_postfix_str(f"{len(set_ids)} sets: {combo.label}", refresh=True)
                    t = time.perf_counter()
                    key = stable_hash({"row": keys[combo], "sets": [s.facts["sha256"] for s in stack.sets]}, 24)
                    r = run_combination(stack_ctx, converter, combo, srun.run_id, key)
                    times["running"] += time.perf_counter() - t
                    times["converting"] += r.times.convert
                    by_target[combo.target] = by_target.get(combo.target, 0.0) + r.times.runtime
                    preds = stack.split(np.load(r.outputs_path, allow_pickle=False).argmax(1)) \
                        if r.outputs_path else {}
                    for cs in stack.sets:
                        srun.save(row_key(cs.plan.set_id, keys[combo]),
                                  _row_point(cs, combo, r, preds.get(cs.plan.set_id), pc_preds, y))
                    measured += len(set_ids)
                    bar.update(len(set_ids))
    except BaseException:
        bar.close()
        converter.close()
        srun.finish("interrupted")
        raise
    bar.close()
    converter.close()
    srun.finish()
    if total == 0:
        log(f"run {srun.run_id}: every row already measured; nothing run again")
    paths = write_study_report(srun, report(srun))
    return RobustnessOutcome(srun.run_id, paths, measured, len(plans) * len(combos) - total, crafted, reused_sets,
                             times["crafting"], times["running"], time.perf_counter() - t_start,
                             times["converting"], by_target)


def _row_point(cs: CraftedSet, combo: Any, r: Any, preds: np.ndarray | None, pc_preds: dict, y: np.ndarray) -> dict:
    """One (set, row) point: the row's status and, when it ran, its labels on this set and its gallery."""
    payload = {"set": cs.plan.set_id, "kind": "target", "framework": combo.framework,
               "combo": {k: getattr(combo, k) for k in ("framework", "format", "quantize", "target",
                                                         "device", "backend", "runtime")},
               "label": combo.label, "status": r.status.value, "reason": r.reason,
               "final": r.status.final, "converted": r.artifact.sha256 if r.artifact else None}
    if preds is not None:
        payload["preds"] = preds.tolist()
        pc = pc_preds[combo.framework][cs.plan.set_id]
        only = np.flatnonzero((preds != y) & (pc == y))[:GALLERY_PER_ROW].tolist()
        payload["gallery"] = _thumbnails(cs.x01, only, [f"#{i} y={y[i]}|PC {pc[i]} -> {preds[i]}" for i in only])
    return payload
