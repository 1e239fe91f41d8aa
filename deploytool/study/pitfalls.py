"""`deploytool study pitfalls`: what one preprocessing mistake at a time costs in accuracy, on the PC model
and on every migrated artifact (seed 003, MLModelScope: a missing centre crop costs 1.45–7.5 points of
top-1, a layout mistake far more).

The mistakes (deploytool/data/mistakes.py) are built from the raw test images and fed through migrate's own
machinery (its matrix, context, cached trainings and conversions, runtimes and sessions): the clean set and each
mistaken copy are stacked into one test set (robust_sets.Stack, each copy padded to whole batches so its answers
are the ones it gets alone) and every row runs the stack in ONE runtime call — one model load, one browser page,
all web rows in one browser — and is scored per copy after splitting its outputs back by offsets. The int8
mistake needs each int8-input artifact's own scale and zero point: those artifacts are converted (or read from
the cache) first and their copies join the stack. Points are keyed per framework and resumed.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from deploytool.artifact import array_sha256
from deploytool.convert import Converter, artifact_format
from deploytool.convert.lanes import ConversionLanes
from deploytool.data import _as_nhwc, load_dataset, load_raw
from deploytool.data.check import preprocessing_warnings
from deploytool.data.mistakes import INT8_UNSCALED, MISTAKES, NAMES, int8_unscaled, preprocess
from deploytool.errors import UnknownOption
from deploytool.migrate import MigrateRequest, prepare
from deploytool.modelfiles.tflite_io import read_io
from deploytool.report.svg import Cell, heatmap
from deploytool.run.context import Source
from deploytool.run.flags import target_words
from deploytool.run.runner import conversions_ahead, convert_cached, run_combination
from deploytool.run.usermodel import is_model_file
from deploytool.spec import load_spec
from deploytool.study.base import StudyRun, register_study
from deploytool.study.report import Section, Table, write_study_report
from deploytool.study.robust_sets import CraftedSet, SetPlan, Stack, pc_baseline
from deploytool.targets import expand, target_flags
from deploytool.workspace import stable_hash

HELP = ("what one preprocessing mistake at a time (no normalisation, 0–255 range, swapped height/width or "
        "layout, BGR, off-centre crop, int8 scaling skipped) costs on the PC model and every migrated artifact")
EXAMPLES = ("deploytool study pitfalls --model lenet5 --target host,web",
            "deploytool study pitfalls --model lenet5 --target host --format tflite --quantize none,int8-io "
            "--samples 200")

# Seed 003 (Dakkak et al., "Frustrated with Replicating Claims of a Shared Model? A Solution", MLModelScope,
# arXiv 2018), as /work/shared/seeds/003_*.txt states them: ImageNet models, top-1 points lost.
PUBLISHED: dict[str, str] = {
    "off_centre_crop": "1.45–7.5 (no centre crop; top-5 0.36–4.22)",
    "nchw_as_nhwc": "“extremely low accuracy” (no figure given)",
}
NOT_PUBLISHED = "—"
SEED = "seed 003, MLModelScope (Dakkak et al. 2018)"


def add_cli(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="host", help=f"{target_words()} (comma-separated, or all; default: host)")
    p.add_argument("--format", default="tflite,onnx,tfjs",
                   help="formats to migrate to, as for migrate (default: tflite,onnx,tfjs)")
    p.add_argument("--quantize", default="none,int8-io",
                   help="quantizations, as for migrate (default: none,int8-io; int8-io artifacts also get the "
                        "'int8 scaling skipped' mistake)")
    p.add_argument("--samples", type=int, default=500,
                   help="test samples per mistake (default: 500; each mistake is one more copy of them)")
    for target in target_flags():
        target.add_cli_options(p)


@register_study("pitfalls")
def run(args: argparse.Namespace) -> int:
    if args.samples < 1:
        raise UnknownOption(f"--samples {args.samples}: must be >= 1")
    plan = Plan.build(args.model, args.framework, args.data_dir, args.epochs, args.samples)
    target_options = {t.name: opts for t in target_flags() if (opts := t.options_from_cli(args))}
    request = {**plan.identity(), "formats": args.format, "quantize": args.quantize, "targets": args.target,
               "target_options": target_options}
    srun = StudyRun.open("pitfalls", plan.spec.name, request, args.workspace, args.db, args.run_id, args.fresh)
    try:
        measure(srun, plan, request, progress=not args.quiet)
    except BaseException:
        srun.finish("interrupted")
        raise
    srun.finish()
    paths = write_study_report(srun, report(srun))
    print(summary_text(srun.points()))
    print(f"report: {paths.html}")
    print(f"study run {srun.run_id}")
    return 0


class Plan:
    """The zoo model, its raw test images and the mistaken copies of them: everything but the targets."""

    def __init__(self, spec: Any, dataset: Any, raw_x: np.ndarray, y: np.ndarray, frameworks: list[str],
                 epochs: int | None, data_dir: Any = None):
        self.spec, self.dataset, self.raw_x, self.y = spec, dataset, raw_x, y
        self.frameworks, self.epochs, self.data_dir = frameworks, epochs, data_dir

    @classmethod
    def build(cls, model: str, framework: str, data_dir: Any, epochs: int | None, samples: int) -> "Plan":
        if is_model_file(model):
            raise UnknownOption(f"{model}: the pitfalls study takes a model of the zoo (`deploytool models`): "
                                "it needs the raw images and the preprocessing the model was trained with")
        spec = load_spec(model)
        dataset = load_dataset(spec, data_dir)
        raw = load_raw(spec.dataset, spec, data_dir)
        raw_x = _as_nhwc(raw.x_test, spec.hwc, spec.dataset)
        idx = spread(len(raw_x), samples)
        return cls(spec, dataset, np.asarray(raw_x[idx], np.float32), raw.y_test.astype(np.int64).ravel()[idx],
                   expand((framework,), spec.frameworks, "framework"), epochs, data_dir)

    def identity(self) -> dict[str, Any]:
        return {"model": self.spec.name, "spec": self.spec.content_hash(), "data": self.dataset.sha256,
                "frameworks": self.frameworks, "epochs": self.epochs, "samples": len(self.y)}

    def segments(self) -> tuple[list[tuple[str, np.ndarray]], dict[str, str], dict[str, bool]]:
        """([(name, fed tensor)] starting with "clean"; mistake -> why not applicable;
        mistake -> whether migrate's pitfall check warns on the data a user would hand over)."""

        p, shape = self.spec.preprocess, self.spec.input_shape
        out, skipped, caught = [("clean", preprocess(self.raw_x, p))], {}, {}
        for m in MISTAKES:
            why = m.not_applicable(shape, p)
            if why:
                skipped[m.name] = why
                continue
            x, declared = m.user_data(self.raw_x, p)
            caught[m.name] = bool(preprocessing_warnings(x, declared))
            out.append((m.name, m.feed(self.raw_x, p)))
        return out, skipped, caught


def spread(total: int, n: int) -> np.ndarray:
    """`n` indices spread evenly over the test set: the bundled MNIST split is sorted by label, so its
    first samples are all zeros."""
    return np.unique(np.linspace(0, total - 1, min(n, total)).round().astype(int))


def _request(plan: Plan, request: dict[str, Any]) -> Any:
    """migrate's request for the study's matrix (the zoo model, its cached conversions and runtimes). Latency is
    not this study's question: no warm-up, one timed sample per row."""

    # the manifest the study was given (a zoo name resolves to its file; a user's .toml is not in the zoo)
    return MigrateRequest(model=plan.spec.source or plan.spec.name, frameworks=tuple(plan.frameworks), formats=(request["formats"],),
                          quantize=(request["quantize"],), targets=(request["targets"],),
                          target_options=request["target_options"], data_dir=plan.data_dir, epochs=plan.epochs,
                          warmup_runs=0, latency_samples=1)


def _segment(name: str, x: np.ndarray) -> Any:
    """One segment as a set robust_sets can stack, named by its content."""

    return CraftedSet(SetPlan(name, None, None), x, np.ascontiguousarray(x, np.float32), {"sha256": array_sha256(x)})


def _int8_segments(ctx: Any, converter: Converter, combos: list, clean: np.ndarray) -> tuple[dict[str, np.ndarray], dict]:
    """The int8-scaling mistake needs each int8-input artifact's own scale and zero point, so those artifacts are
    converted (or read from migrate's cache) before anything runs: ({segment name: fed tensor}, {artifact sha256:
    (segment name, input facts)}). Artifacts with the same input quantization share a segment."""

    segments: dict[str, np.ndarray] = {}
    by_artifact: dict[str, tuple[str, dict[str, Any]]] = {}
    seen = set()
    for c in combos:
        if artifact_format(c.format) != "tflite" or (c.framework, c.format, c.quantize) in seen:
            continue
        seen.add((c.framework, c.format, c.quantize))
        try:
            artifact = convert_cached(ctx, converter, ctx.source_model(c.framework), c)
            inp = read_io(str(artifact.path))[0][0]
        except Exception:  # a conversion that fails or a file LiteRT cannot read: its rows report it
            continue
        if not inp.quantized:
            continue
        facts = {"dtype": inp.dtype, "scale": inp.scale, "zero_point": inp.zero_point}
        name = f"{INT8_UNSCALED[0]}/{inp.dtype}/{inp.scale!r}/{inp.zero_point}"
        segments.setdefault(name, int8_unscaled(clean, inp.scale, inp.zero_point, inp.dtype))
        by_artifact[artifact.sha256] = (name, facts)
    return segments, by_artifact


def measure(srun: Any, plan: Plan, request: dict[str, Any], progress: bool = False) -> None:
    """Every row of the matrix runs the clean set and every mistaken copy (and the int8 copies) as ONE stacked test
    set (robust_sets.Stack: one model load, one browser page, split back by offsets), in one migrate context: one
    browser for all web rows, each PC model's baseline once. A point per framework is stored when its rows ran."""
    from dataclasses import replace

    done = srun.points()
    todo = [fw for fw in plan.frameworks if f"rows/{fw}" not in done]
    if not todo:
        return
    segments, skipped, caught = plan.segments()
    names = [n for n, _ in segments]
    ctx, combos, _, keys = prepare(_request(plan, request), srun.ws, progress)
    combos = [c for c in combos if c.framework in todo]
    converter = ConversionLanes(srun.ws.root / "logs", srun.run_id, ctx.req.timeout_s)
    try:
        for fw in todo:  # every conversion starts now, each framework's in its own worker
            for fmt, quantize, out, calibration in conversions_ahead(ctx, combos, fw, ctx.source_model(fw)):
                converter.prefetch(ctx.source_model(fw), fmt, quantize, out, calibration)
        int8, by_artifact = _int8_segments(ctx, converter, combos, segments[0][1])
        stack = Stack(tuple(_segment(n, x) for n, x in [*segments, *int8.items()]), len(plan.y))
        ds = stack.dataset(ctx.dataset, plan.y, ctx.spec.layout)
        out_dir = srun.ws.inside(srun.ws.root / "outputs" / srun.run_id / "pc" / ds.sha256[:16])
        with ctx.sessions():
            for fw in todo:
                art = ctx.source_model(fw)
                b = pc_baseline(ctx, fw, art, ds, out_dir)
                pc = _scores(stack.split(b.predictions), plan.y, names)
                stack_ctx = replace(ctx, dataset=ds, sources={fw: Source(fw, art, b)})
                rows = []
                for combo in (c for c in combos if c.framework == fw):
                    key = stable_hash({"row": keys[combo], "sets": [s.facts["sha256"] for s in stack.sets]}, 24)
                    r = run_combination(stack_ctx, converter, combo, srun.run_id, key)
                    rows.append(_row(r, stack, plan.y, names, by_artifact))
                srun.save(f"rows/{fw}", {"framework": fw, "segments": names, "samples": len(plan.y), "pc": pc,
                                         "rows": rows, "not_applicable": skipped, "check_warns": caught,
                                         "int8_inputs": {n: f for n, f in by_artifact.values()}})
    finally:
        converter.close()


def _scores(preds: dict[str, np.ndarray], y: np.ndarray, names: list[str]) -> dict[str, float]:
    return {n: float(np.mean(preds[n] == y)) for n in names}


def _row(r: Any, stack: Any, y: np.ndarray, names: list[str], by_artifact: dict[str, tuple[str, dict]]) -> dict:
    """One row: its status, and its accuracy per segment when it ran (the int8 copy made for its own artifact
    scored as "int8_unscaled")."""

    c = r.combo
    row = {"label": c.label, "framework": c.framework, "format": c.format, "quantize": c.quantize,
           "where": c.where, "status": str(r.status.value), "reason": r.reason or "", "accuracy": {},
           "artifact_sha256": r.artifact.sha256 if r.artifact else ""}
    if r.comparison is not None and r.outputs_path:
        preds = stack.split(np.load(r.outputs_path, allow_pickle=False).argmax(1))
        row["accuracy"] = _scores(preds, y, names)
        own = by_artifact.get(row["artifact_sha256"])
        if own is not None:
            row["accuracy"][INT8_UNSCALED[0]] = float(np.mean(preds[own[0]] == y))
            row["int8_input"] = own[1]
    return row


# ------------------------------------------------------------------------------------------- the report


def drops(points: dict[str, dict[str, Any]]) -> tuple[list[str], list[str], dict[tuple[str, str], Any], dict]:
    """(row labels, mistake names, (label, mistake) -> accuracy drop in points or a reason string, extras).
    A row's drop is its clean accuracy minus its accuracy on the mistaken copy, both on the same samples."""

    labels: list[str] = []
    cells: dict[tuple[str, str], Any] = {}
    clean: dict[str, float] = {}
    skipped: dict[str, str] = {}
    caught: dict[str, bool] = {}
    for key, pt in sorted(points.items()):
        if not key.startswith("rows/"):
            continue
        skipped.update(pt["not_applicable"])
        caught.update(pt["check_warns"])
        fw = pt["framework"]
        entries = [(f"{fw} (PC model)", pt["pc"])] + [(r["label"], r["accuracy"]) for r in pt["rows"]]
        for label, acc in entries:
            if not acc:
                continue  # not measured (unsupported, failed): the migrate run's report says why
            labels.append(label)
            clean[label] = acc["clean"]
            for name in NAMES:
                if name in acc:
                    cells[(label, name)] = 100.0 * (acc["clean"] - acc[name])
                elif name in pt["not_applicable"]:
                    cells[(label, name)] = "n/a"
                elif name == "int8_unscaled":
                    cells[(label, name)] = "float input"  # replaced below for int8-input artifacts
    for key, pt in points.items():
        if key.startswith("int8/"):
            for r in pt["rows"]:
                if r["accuracy"] and r["label"] in clean:
                    cells[(r["label"], "int8_unscaled")] = 100.0 * (clean[r["label"]] - r["accuracy"]["int8_unscaled"])
    names = [n for n in NAMES if any(isinstance(cells.get((lbl, n)), float) for lbl in labels)] + \
            [n for n in NAMES if not any(isinstance(cells.get((lbl, n)), float) for lbl in labels)]
    return labels, names, cells, {"clean": clean, "not_applicable": skipped, "check_warns": caught}


def _cell_text(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:+.1f}"
    return "" if v is None else str(v)


def _titles() -> dict[str, str]:
    return {**{m.name: m.title for m in MISTAKES}, INT8_UNSCALED[0]: INT8_UNSCALED[1]}


def report(srun: Any) -> list[Section]:
    points = srun.points()
    labels, names, cells, extra = drops(points)
    titles = _titles()
    published = tuple(PUBLISHED.get(n, NOT_PUBLISHED) for n in names)
    checked = tuple("warns" if extra["check_warns"].get(n) else ("silent" if n in extra["check_warns"] else "—")
                    for n in names)
    rows = [(f"published ({SEED})", *published), ("migrate's pitfall check", *checked)]
    rows += [(lbl, *(_cell_text(cells.get((lbl, n))) for n in names)) for lbl in labels]
    table = Table(("row", *names), tuple(rows), caption="accuracy drop in points (clean minus mistaken, same "
                                                        "samples); n/a: cannot happen to this data")
    grid = [[_heat(cells.get((lbl, n))) for n in names] for lbl in labels]
    figure = heatmap(grid, labels, names, title="accuracy drop (points) per mistake and row") if labels else ""
    samples = next((pt["samples"] for k, pt in points.items() if k.startswith("rows/")), 0)
    legend = Table(("mistake", "what the user did", "not applicable because"),
                   tuple((n, titles[n], extra["not_applicable"].get(n, "")) for n in names))
    clean = Table(("row", "clean accuracy"), tuple((lbl, f"{100 * a:.2f}%") for lbl, a in extra["clean"].items()))
    runs = Table(("row", "status", "why not measured"),
                 tuple((r["label"], r["status"], r["reason"]) for k, pt in sorted(points.items())
                       if k.startswith("rows/") for r in pt["rows"]))
    return [
        Section("drops", "Accuracy drop per mistake", f"Each row fed {samples} test samples clean and with one "
                "mistake at a time; the first line is what seed 003 published for the same mistake on ImageNet "
                "models, the second whether migrate's pitfall check warns on the data a user would hand over.",
                tables=(table,), figures=(figure,) if figure else (),
                data={"drop_points": {f"{lbl}|{n}": cells.get((lbl, n)) for lbl in labels for n in names},
                      "published": PUBLISHED, "check_warns": extra["check_warns"]}),
        Section("mistakes", "The mistakes", "How each mistaken copy was made (deploytool/data/mistakes.py).",
                tables=(legend,)),
        Section("clean", "Clean accuracy", "Each row's accuracy on the same samples without a mistake.",
                tables=(clean,)),
        Section("rows", "Rows", "Every row of the matrix and its status; a row not measured (unsupported, failed) "
                "says why and has no line in the drops table.", tables=(runs,)),
    ]


def _heat(v: Any) -> Any:
    if not isinstance(v, float):
        return Cell("#eeeeee", "n/a" if v == "n/a" else "", str(v or "not measured")) if v else None
    t = max(0.0, min(1.0, v / 80.0))
    red, green = int(255 - 40 * t), int(245 - 200 * t)
    return Cell(f"#{red:02x}{green:02x}{int(235 - 200 * t):02x}", f"{v:+.1f}", f"{v:+.2f} points", dark=t > 0.6)


def summary_text(points: dict[str, dict[str, Any]]) -> str:
    labels, names, cells, _ = drops(points)
    widths = [max(len(lbl) for lbl in labels)] if labels else [10]
    head = "row".ljust(widths[0]) + "  " + "  ".join(n[:16].rjust(16) for n in names)
    lines = ["accuracy drop in points (clean - mistaken):", head]
    for lbl in labels:
        lines.append(lbl.ljust(widths[0]) + "  " + "  ".join(_cell_text(cells.get((lbl, n)))[:16].rjust(16)
                                                             for n in names))
    return "\n".join(lines)
