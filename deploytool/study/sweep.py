"""`deploytool study sweep`: what thread count and batch size cost at inference on every runtime a request
names, and what batch size, threads and optimizer/learning rate cost in training (seeds 002 and 004).

Inference: each runtime (the PC baselines Keras and PyTorch, LiteRT and onnxruntime on the host, TF.js on every
backend, onnxruntime-web and tfjs-tflite in Chromium, benchmark_model on a phone) runs the grid threads x batch.
Host runtimes run in a child process (sweep_worker.py, in a proc.worker.Worker) that times whole batches
(sweep_measure.py); the browser and the phone run whole sets at each point, so there only batch 1 has per-sample
percentiles (a phone's batches and latency runs are each a benchmark_model process, so its points run a few of
each). Training: one child per grid point, through train.py's own fit functions. Models come from migrate's caches (trained models, converted
artifacts). Every point is stored as it is measured; the same request resumes and measures only what is missing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
import tomllib
from dataclasses import asdict, field, fields
from pathlib import Path
from typing import Any, Callable

from deploytool import convert
from deploytool.convert.isolated import IsolatedConverter
from deploytool.errors import DeploytoolError, StageFailed, UnknownOption, exception_name
from deploytool.migrate import requested_targets
from deploytool.proc.worker import Worker, WorkerLost, WorkerTimedOut
from deploytool.provenance import host_identity
from deploytool.result import Combo
from deploytool.run.context import RunContext
from deploytool.run.flags import target_words
from deploytool.run.request import MigrateRequest
from deploytool.run.runner import convert_cached
from deploytool.runtimes import Runtime, make_runtime, runtime_class, runtimes_for
from deploytool.spec import OPTIMIZERS, TrainSpec
from deploytool.study import sweep_worker
from deploytool.study.base import StudyRun, register_study
from deploytool.study.report import write_study_report
from deploytool.study.sweep_measure import PointBudget
from deploytool.study.sweep_report import sections
from deploytool.proc.quiet import WORKER_ENV
from deploytool.study.sweep_worker import TF_FORMATS
from deploytool.targets import Position, RunSettings, expand, get_target, target_flags
from deploytool.train import train
from deploytool.value import value
from deploytool.workspace import Workspace

HELP = ("what threads and batch size cost at inference on every runtime (p50/p90 per sample, throughput, "
        "memory, CPU), and batch size x threads x learning rate in training")
EXAMPLES = ("deploytool study sweep --model lenet5",
            "deploytool study sweep --target host,web --threads 1,2 --batch 1,8,32,256",
            "deploytool study sweep --part train --train-batch 32,128 --lr 0.001,0.01 --target-accuracy 0.97")

DEFAULT_BATCHES = (1, 8, 32, 256)
RUNTIMES = ("keras", "torch", "litert", "onnxruntime", "tfjs", "onnxruntime-web", "tfjs-tflite", "benchmark_model")
SWEEP_FORMATS = ("tflite", "onnx", "tfjs")  # fp32 artifacts: the sweep measures runtimes, not quantization
PARTS = ("all", "infer", "train")
WORKER_TIMEOUT_S = 900.0


@value
class Grid:
    threads: tuple[int, ...]
    batches: tuple[int, ...]
    train_batches: tuple[int, ...]
    train_threads: tuple[int, ...]
    learning_rates: tuple[float, ...]
    optimizers: tuple[str, ...]
    train_epochs: int = 1
    train_samples: int | None = 2000  # the first N training images: keeps the default grid cheap
    target_accuracy: float | None = None


def _numbers(text: Any, kind: type, flag: str) -> tuple:
    items = text if isinstance(text, (list, tuple)) else str(text).split(",")
    try:
        values = tuple(kind(v) for v in items if str(v).strip())
    except (TypeError, ValueError):
        raise UnknownOption(f"{flag} {text!r}: expected {kind.__name__} values separated by commas") from None
    if not values or any(not v > 0 for v in values):
        raise UnknownOption(f"{flag} {text!r}: expected positive numbers separated by commas, e.g. 1,2")
    return tuple(dict.fromkeys(values))


def resolve_grid(flags: dict[str, Any], manifest: dict[str, Any], train_defaults: Any, cores: int) -> Grid:
    """The grid from the flags, else the manifest's [sweep] table, else the defaults: threads 1..cores, batches
    1/8/32/256, and one training point at the manifest's batch size and learning rate on one thread."""

    unknown = sorted(set(manifest) - set(_MANIFEST_KEYS))
    if unknown:
        raise UnknownOption(f"[sweep] has no key {', '.join(unknown)}; its keys are {', '.join(_MANIFEST_KEYS)}")

    def pick(name: str, default: Any) -> Any:
        if flags.get(name) is not None:
            return flags[name]
        return manifest.get(name, default)

    raw = pick("optimizer", [train_defaults.optimizer])
    optimizers = tuple(o.strip() for o in (raw.split(",") if isinstance(raw, str) else map(str, raw)) if o.strip())
    bad = [o for o in optimizers if o not in OPTIMIZERS]
    if bad:
        raise UnknownOption(f"unknown optimizer {bad[0]!r}; choose from {', '.join(OPTIMIZERS)}")
    target = pick("target_accuracy", None)
    if target is not None and not 0 < float(target) <= 1:
        raise UnknownOption(f"--target-accuracy {target}: expected a fraction in (0, 1], e.g. 0.97")
    samples = pick("train_samples", 2000)
    samples = None if str(samples).strip() in ("0", "") else samples  # 0: the whole training split
    return Grid(
        threads=_numbers(pick("threads", list(range(1, cores + 1))), int, "--threads"),
        batches=_numbers(pick("batch", list(DEFAULT_BATCHES)), int, "--batch"),
        train_batches=_numbers(pick("train_batch", [train_defaults.batch_size]), int, "--train-batch"),
        train_threads=_numbers(pick("train_threads", [1]), int, "--train-threads"),
        learning_rates=_numbers(pick("lr", [train_defaults.learning_rate]), float, "--lr"),
        optimizers=tuple(dict.fromkeys(optimizers)),
        train_epochs=_numbers(pick("train_epochs", 1), int, "--train-epochs")[0],
        train_samples=None if samples is None else _numbers(samples, int, "--train-samples")[0],
        target_accuracy=None if target is None else float(target))


def _refuse_threads_above_cores(grid: Grid, targets: list[str], cores: int) -> None:
    """More threads than this machine has cores measures its scheduler, not the model: refused (training always
    runs here; inference here unless every target runs on its own device, a phone)."""
    here = any(get_target(t).threads_on_worker for t in targets)
    asked = [*(grid.threads if here else ()), *grid.train_threads]
    if asked and max(asked) > cores:
        flag = "--threads" if here and max(grid.threads) > cores else "--train-threads"
        raise UnknownOption(f"{flag} asks for {max(asked)} threads; this machine has {cores} CPU(s): "
                            f"ask for at most {cores}")


_MANIFEST_KEYS = ("threads", "batch", "train_batch", "train_threads", "lr", "optimizer", "train_epochs",
                  "train_samples", "target_accuracy")


@value
class Unit:
    """One runtime running one model file: the PC baseline's own model, or a converted artifact on a target."""

    framework: str
    format: str  # the user's format word (tflite, onnx, tfjs), "" for the source model itself
    target: str  # "pc" for the source model
    runtime: str  # registry name
    backend: str = ""
    device: str = ""

    @property
    def key(self) -> str:
        where = self.target + (f":{self.backend}" if self.backend else "") + (f"@{self.device}" if self.device else "")
        return f"{where}/{self.runtime}/{self.framework}" + (f"-{self.format}" if self.format else "")

    @property
    def label(self) -> str:
        shown = RUNTIME_LABELS.get(self.runtime, self.runtime) + (f" {self.backend}" if self.backend else "")
        return shown + (f" ({self.framework}→{self.format})" if self.format else "")


RUNTIME_LABELS = {"keras": "Keras", "torch": "PyTorch", "litert": "LiteRT", "onnxruntime": "onnxruntime",
                  "tfjs": "TF.js", "onnxruntime-web": "onnxruntime-web", "tfjs-tflite": "tfjs-tflite",
                  "benchmark_model": "benchmark_model"}


def infer_key(unit: Unit, threads: int, batch: int) -> str:
    return f"infer/{unit.key}/t{threads}/b{batch}"


def train_key(framework: str, batch: int, threads: int, optimizer: str, lr: float) -> str:
    return f"train/{framework}/b{batch}/t{threads}/{optimizer}/lr{lr:g}"


def train_summary(raw: dict[str, Any], target_accuracy: float | None) -> dict[str, Any]:
    """Per training point: seconds per epoch (mean), CPU % over the epochs, final accuracy, and the first epoch
    (1-based) whose test accuracy reaches the target (None: not within the epochs run)."""
    seconds = [float(s) for s in raw.get("seconds_per_epoch") or []]
    acc = [float(a) for a in raw.get("accuracy_per_epoch") or []]
    cpu = [float(c) for c in raw.get("cpu_seconds_per_epoch") or []]
    reached = None
    if target_accuracy is not None:
        reached = next((i + 1 for i, a in enumerate(acc) if a >= target_accuracy), None)
    return {"seconds_per_epoch_mean": sum(seconds) / len(seconds) if seconds else None,
            "cpu_percent": 100.0 * sum(cpu) / sum(seconds) if seconds and sum(seconds) > 0 else None,
            "final_accuracy": acc[-1] if acc else None, "epochs_to_target": reached,
            "seconds_to_target": sum(seconds[:reached]) if reached else None}


# -- the CLI ---------------------------------------------------------------------------------------------
def add_cli(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="host", help=f"{target_words()} (comma-separated; default: host)")
    p.add_argument("--runtimes", default=",".join(RUNTIMES),
                   help=f"runtimes to sweep, of {', '.join(RUNTIMES)} (default: all those the targets offer)")
    p.add_argument("--part", choices=PARTS, default="all", help="the inference grid, the training grid, or both")
    p.add_argument("--threads", default=None, help="inference thread counts, e.g. 1,2 (default: 1..cores)")
    p.add_argument("--batch", default=None, help="inference batch sizes (default: 1,8,32,256)")
    p.add_argument("--samples", type=int, default=256, help="samples timed per inference point, at least (default 256)")
    p.add_argument("--max-seconds", type=float, default=2.0,
                   help="a slow inference point stops after this many seconds, once it has 3 batches (default 2)")
    p.add_argument("--train-batch", default=None, help="training batch sizes (default: the manifest's)")
    p.add_argument("--train-threads", default=None, help="training thread counts (default: 1)")
    p.add_argument("--lr", default=None, help="learning rates (default: the manifest's)")
    p.add_argument("--optimizer", default=None, help="adam, sgd (comma-separated; default: the manifest's)")
    p.add_argument("--train-epochs", default=None, help="epochs per training point (default 1)")
    p.add_argument("--train-samples", default=None,
                   help="train on the first N training images (default 2000; 0 = all)")
    p.add_argument("--target-accuracy", type=float, default=None,
                   help="report the epochs (and seconds) each training point needs to reach this test accuracy")
    for t in target_flags():
        t.add_cli_options(p)  # --backend (web), --device/--delegate (android)
    # The web sweep covers the CPU-side backends by default; webgpu is asked for (`--backend all` or
    # `wasm,cpu,webgl,webgpu`): on a software adapter (SwiftShader) one of its points takes minutes.
    p.set_defaults(backend="wasm,cpu,webgl")


@register_study("sweep")
def run(args: argparse.Namespace) -> int:
    flags = {k: getattr(args, k) for k in ("threads", "batch", "train_batch", "train_threads", "lr", "optimizer",
                                           "train_epochs", "train_samples", "target_accuracy")}
    if args.samples < 1 or not args.max_seconds > 0:
        raise UnknownOption("--samples must be >= 1 and --max-seconds > 0")
    req = MigrateRequest(model=args.model, frameworks=(args.framework,), formats=("all",), quantize=("none",),
                         targets=(args.target,), data_dir=args.data_dir, epochs=args.epochs,
                         target_options={t.name: o for t in target_flags() if (o := t.options_from_cli(args))})
    budget = PointBudget(min_samples=args.samples, max_seconds=args.max_seconds)
    out = sweep(req, flags, tuple(r.strip() for r in args.runtimes.split(",") if r.strip()), args.part, budget,
                workspace=args.workspace, db=args.db, run_id=args.run_id, fresh=args.fresh,
                progress=not args.quiet)
    print(f"report: {out.report_html}")
    print(f"run {out.run_id}: {out.measured} point(s) measured, {out.reused} already stored, "
          f"{out.failed} failed or skipped, {out.seconds:.0f} s")
    return 0


# -- the study -----------------------------------------------------------------------------------------
@value(frozen=False)
class SweepOutcome:
    run_id: str
    measured: int
    reused: int
    failed: int
    seconds: float
    report_html: Path | None = None
    points: dict[str, dict[str, Any]] = field(default_factory=dict)


def manifest_table(spec: Any) -> dict[str, Any]:
    """The manifest's [sweep] table ({} without one, or for a user's model file)."""
    if not spec.source or not str(spec.source).endswith(".toml"):
        return {}
    return dict(tomllib.loads(Path(spec.source).read_text(encoding="utf-8")).get("sweep") or {})


def _identity(ctx: RunContext, frameworks: Any, part: str, runtimes: tuple[str, ...], grid: Any,
              budget: PointBudget) -> dict[str, Any]:
    """What a sweep's points belong to (its study run's identity): the manifest, data, host, sources, targets
    and their options, the runtimes, the grid and the budget."""
    return {"spec": ctx.spec.content_hash(), "data": ctx.dataset.sha256, "host": host_identity(),
            "sources": {fw: ctx.source_id(fw) for fw in frameworks}, "part": part,
            "targets": {t: ctx.identity(t) for t in sorted(ctx.preflight)},
            "target_options": {t: ctx.target_options[t].to_dict() for t in sorted(ctx.preflight)},
            "runtimes": sorted(runtimes), "grid": asdict(grid), "budget": asdict(budget)}


def _measure_points(ctx: RunContext, srun: Any, grid: Any, budget: PointBudget, todo_infer: list, todo_train: list,
                    progress: bool) -> dict[str, int]:
    """Every point still to measure, each stored as it ends (a progress bar over them); the run finished, or
    marked interrupted when stopped. Returns how many were measured and how many failed."""
    from tqdm import tqdm

    bar = tqdm(total=len(todo_infer) + len(todo_train), desc="sweep", unit="point", disable=not progress,
               dynamic_ncols=True)
    counts = {"measured": 0, "failed": 0}

    def save(key: str, payload: dict[str, Any]) -> None:
        srun.save(key, payload)
        counts["measured" if payload.get("status") == "measured" else "failed"] += 1
        bar.update(1)

    try:
        if todo_infer:
            _Inference(ctx, srun, budget, bar).run(todo_infer, save)
        for fw, b, t, o, lr in todo_train:
            bar.set_postfix_str(f"train {fw} batch {b} threads {t} {o} lr {lr:g}", refresh=True)
            save(train_key(fw, b, t, o, lr), _train_point(ctx, srun, grid, fw, b, t, o, lr))
    except (KeyboardInterrupt, DeploytoolError):
        srun.finish("interrupted")
        raise
    finally:
        bar.close()
    srun.finish()
    return counts


def sweep(req: Any, flags: dict[str, Any], runtimes: tuple[str, ...], part: str = "all",
          budget: PointBudget | None = None, *, workspace: str | Path | None = None, db: str | None = None,
          run_id: str | None = None, fresh: bool = False, progress: bool = False,
          log: Callable[[str], None] = print) -> SweepOutcome:
    t0 = time.perf_counter()
    budget = budget or PointBudget()
    unknown = [r for r in runtimes if r not in RUNTIMES]
    if unknown:
        raise UnknownOption(f"unknown runtime {unknown[0]!r}; the sweep runs {', '.join(RUNTIMES)}")
    if part not in PARTS:
        raise UnknownOption(f"unknown part {part!r}; choose from {', '.join(PARTS)}")

    cores = os.cpu_count() or 1
    targets = requested_targets(req)
    # the flags alone, before anything loads
    _refuse_threads_above_cores(resolve_grid(flags, {}, TrainSpec(1, 1, "adam", 1.0, 0), 1), targets, cores)
    ws = Workspace.open(workspace)
    ctx = RunContext.build(req, ws, targets=targets, progress=progress)
    frameworks = expand(req.frameworks, ctx.spec.frameworks, "framework")
    grid = resolve_grid(flags, manifest_table(ctx.spec), ctx.spec.train, cores)
    _refuse_threads_above_cores(grid, targets, cores)
    units = plan_units(ctx, frameworks, runtimes) if part in ("all", "infer") else []
    if part in ("all", "infer") and not units:
        raise UnknownOption(f"no runtime of {', '.join(runtimes)} runs on {', '.join(ctx.preflight)}; "
                            "check --runtimes and --target")
    trains = ([(fw, b, t, o, lr) for fw in frameworks if ctx.user_artifact is None
               for b, t, o, lr in itertools.product(grid.train_batches, grid.train_threads, grid.optimizers,
                                                    grid.learning_rates)] if part in ("all", "train") else [])
    request = _identity(ctx, frameworks, part, runtimes, grid, budget)
    srun = StudyRun.open("sweep", ctx.spec.name, request, ws.root, db, run_id, fresh)
    # a crashed measuring process ("error") is measured again on resume; every other outcome is final
    done = {k for k, p in srun.points().items() if p.get("status") != "error"}
    todo_infer = [(u, t, b) for u in units for t in grid.threads for b in grid.batches
                  if infer_key(u, t, b) not in done]
    todo_train = [p for p in trains if train_key(*p) not in done]
    total = len(todo_infer) + len(todo_train)
    reused = len(units) * len(grid.threads) * len(grid.batches) + len(trains) - total
    if reused:
        log(f"run {srun.run_id}: {reused} point(s) already stored; measuring the other {total}")
    counts = _measure_points(ctx, srun, grid, budget, todo_infer, todo_train, progress)

    points = srun.points()
    paths = write_study_report(srun, sections(srun.run_id, request, points))
    return SweepOutcome(srun.run_id, counts["measured"], reused, counts["failed"], time.perf_counter() - t0,
                        paths.html, points)


def report(srun: Any) -> list:
    return sections(srun.run_id, srun.request, srun.points())


def plan_units(ctx: Any, frameworks: list[str], runtimes: tuple[str, ...]) -> list[Unit]:
    units = []
    for fw in frameworks:
        source_format = ctx.user_artifact.format if ctx.user_artifact is not None else fw
        units += [Unit(fw, "", "pc", name) for name in runtimes_for("pc", source_format)[:1] if name in runtimes]
        for fmt in SWEEP_FORMATS:
            if not convert.quantize_modes(fw, fmt):
                continue  # this source has no route to the format
            artifact_format = convert.artifact_format(fmt)
            for target in ctx.preflight:
                for name in runtimes_for(target, artifact_format):
                    if name not in runtimes:
                        continue
                    for pos in get_target(target).positions(ctx.target_options[target], ctx.preflight[target],
                                                            artifact_format):
                        units.append(Unit(fw, fmt, target, name, pos.backend, pos.device))
    return units


class _Inference:
    """The inference grid: each unit's artifact from migrate's caches, then its missing points measured."""

    def __init__(self, ctx: Any, srun: Any, budget: PointBudget, bar: Any):
        self.ctx, self.srun, self.budget, self.bar = ctx, srun, budget, bar
        self.tmp = srun.ws.root / "tmp" / f"sweep-{srun.run_id}"

    def run(self, todo: list[tuple[Unit, int, int]], save: Callable[[str, dict[str, Any]], None]) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        by_unit: dict[Unit, dict[int, list[int]]] = {}
        for u, t, b in todo:
            by_unit.setdefault(u, {}).setdefault(t, []).append(b)
        converter = IsolatedConverter(self.ctx.ws.root / "logs" / f"convert-{self.srun.run_id}.log",
                                      self.ctx.req.timeout_s)
        try:
            with self.ctx.sessions():
                for unit, per_thread in by_unit.items():
                    self.bar.set_postfix_str(unit.label, refresh=True)
                    try:
                        artifact = self._artifact(unit, converter)
                    except Exception as e:  # a conversion that fails: every point of this unit says why
                        reason = getattr(e, "reason", None) or f"{type(e).__name__}: {e}"
                        for t, batches in per_thread.items():
                            for b in batches:
                                save(infer_key(unit, t, b), {**_base(unit, t, b), "status": getattr(
                                    e, "status", "conversion_failed"), "reason": str(reason)[:500]})
                        continue
                    fmt = artifact.format
                    if runtime_class(unit.target, fmt, unit.runtime).in_process:
                        self._in_worker(unit, artifact, per_thread, save)
                    else:
                        self._whole_sets(unit, artifact, per_thread, save)
        finally:
            converter.close()

    def _artifact(self, unit: Unit, converter: convert.Converter) -> Any:
        ctx = self.ctx
        if ctx.user_artifact is not None:
            source = ctx.user_artifact
        else:
            source = train(ctx.spec, unit.framework, ctx.dataset, ctx.ws, epochs=ctx.req.epochs,
                           progress=ctx.progress).get_artifact()
        if not unit.format:
            return source
        combo = Combo(unit.framework, unit.format, "none", unit.target, unit.device, unit.backend, unit.runtime)
        # the sweep needs no PC baseline: the source is all the conversion cache reads
        return convert_cached(ctx, converter, source, combo)

    def _inputs(self, layout: str) -> Path:
        import numpy as np

        path = self.tmp / f"inputs-{layout}.npy"
        if not path.exists():
            ds = self.ctx.dataset
            np.save(path, ds.in_layout(ds.x_test[: max(self.budget.min_samples, 256)], layout).first)
        return path

    def _in_worker(self, unit: Unit, artifact: Any, per_thread: dict[int, list[int]], save: Any) -> None:
        # TensorFlow sizes its pools once per process: one child per thread count; others: one child for all
        groups: list[list[tuple[int, list[int]]]] = (  # each: (threads, batches) pairs, as the job takes them
            [[(t, b)] for t, b in per_thread.items()] if artifact.format in TF_FORMATS
            else [[(t, b) for t, b in per_thread.items()]])
        for points in groups:
            job = {"kind": "infer", "target": unit.target, "runtime": unit.runtime, "artifact": artifact.to_json(),
                   "inputs": str(self._inputs(artifact.layout)), "budget": asdict(self.budget), "points": points}
            results: list[dict[str, Any]]
            try:
                results = run_worker(job, self.ctx.ws.root / "logs" / f"{self.srun.run_id}.log")
            except WorkerFailed as e:
                results = [{"threads": t, "batch": b, "status": "error", "reason": str(e)}
                           for t, bs in points for b in bs]
            for r in results:
                save(infer_key(unit, r["threads"], r["batch"]),
                     {**_base(unit, r["threads"], r["batch"]), **r, "artifact_sha256": artifact.sha256,
                      "process": "worker"})

    def _whole_sets(self, unit: Unit, artifact: Any, per_thread: dict[int, list[int]], save: Any) -> None:
        """A browser or a phone: one whole-set run per point (batch 1's latencies are per sample; larger batches
        give throughput, and the mean per sample from it)."""
        import numpy as np

        x = np.load(self._inputs(artifact.layout), allow_pickle=False)
        batch_option = whole_set_batch_option(runtime_class(unit.target, artifact.format, unit.runtime))
        req = self.ctx.req
        for t, batches in per_thread.items():
            for b in batches:
                n, latency_samples = whole_set_sizes(batch_option, self.budget, b)
                inputs = x[np.arange(n) % len(x)]
                settings = RunSettings(t, req.warmup_runs, latency_samples, req.timeout_s)
                options = {**self.ctx.target_runtime_options(unit.target, Position(unit.device, unit.backend),
                                                             settings), batch_option: b}
                base = {**_base(unit, t, b), "artifact_sha256": artifact.sha256, "process": unit.target}
                try:
                    with make_runtime(unit.target, artifact.format, unit.runtime, **options) as rt:
                        rt.load(artifact)
                        out = rt.run(inputs)
                except StageFailed as e:
                    save(infer_key(unit, t, b), {**base, "status": e.status, "reason": e.reason})
                    continue
                save(infer_key(unit, t, b), {**base, **whole_set_point(out, b), "environment": out.environment,
                                             "notes": list(out.notes)})


def whole_set_batch_option(cls: type[Runtime]) -> str:
    """The option an out-of-process runtime takes its whole-set batch from: `batch_size` (the browser) or
    `max_batch` (the phone's accuracy run), as its options' dataclass names them."""
    accepted = {f.name for f in fields(cls.Options)}
    return "batch_size" if "batch_size" in accepted else "max_batch"


def whole_set_sizes(batch_option: str, budget: PointBudget, batch: int) -> tuple[int, int]:
    """(samples, latency samples) of one whole-set point. The browser runs the set in one page, so a point takes
    `min_samples` (and that many batch-1 latency samples); a phone runs each batch, and each latency sample, as a
    benchmark_model process of its own, so a point there takes `min_batches` batches and as many latency runs."""
    if batch_option == "max_batch":
        return batch * budget.min_batches, budget.min_batches
    return max(budget.min_samples, batch * budget.min_batches), (budget.min_samples if batch == 1 else 1)


def whole_set_point(out: Any, batch: int) -> dict[str, Any]:
    lat = out.latency
    sps = out.throughput_sps
    return {"status": "measured", "batches": None, "samples": len(out.outputs),
            "p50_ms_per_sample": lat.p50_ms if batch == 1 else None,
            "p90_ms_per_sample": lat.p90_ms if batch == 1 else None,
            "mean_ms_per_sample": (1e3 / sps) if sps else None, "throughput_sps": sps, "cpu_percent": None,
            "memory_bytes": dict(out.memory_bytes)}


def _base(unit: Unit, threads: int, batch: int) -> dict[str, Any]:
    return {"kind": "infer", "unit": unit.key, "label": unit.label, "runtime": unit.runtime,
            "framework": unit.framework, "format": unit.format, "target": unit.target, "backend": unit.backend,
            "device": unit.device, "threads": threads, "batch": batch}


def _train_point(ctx: Any, srun: Any, grid: Grid, fw: str, batch: int, threads: int, optimizer: str,
                 lr: float) -> dict[str, Any]:
    job = {"kind": "train", "model": ctx.spec.source, "data_dir": str(ctx.req.data_dir or "") or None,
           "framework": fw, "batch_size": batch, "threads": threads, "optimizer": optimizer, "learning_rate": lr,
           "epochs": grid.train_epochs, "train_samples": grid.train_samples}
    base = {"kind": "train", "framework": fw, "batch_size": batch, "threads": threads, "optimizer": optimizer,
            "learning_rate": lr, "epochs": grid.train_epochs, "schedule": ctx.spec.train.schedule}
    try:
        raw = run_worker(job, srun.ws.root / "logs" / f"{srun.run_id}.log")
    except WorkerFailed as e:
        return {**base, "status": "error", "reason": str(e)}
    return {**base, "status": "measured", **raw, **train_summary(raw, grid.target_accuracy)}


class WorkerFailed(Exception):
    pass


def run_worker(job: dict[str, Any], log_path: Path) -> Any:
    """Run one job in a fresh child process (sweep_worker.run); its chatter goes to the run's log, whose last line
    explains a crash."""
    with Worker(log_path=log_path, env=WORKER_ENV) as worker:
        try:
            return worker.call(sweep_worker.run, job, timeout=WORKER_TIMEOUT_S)
        except WorkerTimedOut:
            raise WorkerFailed(f"the measuring process took over {WORKER_TIMEOUT_S:.0f} s") from None
        except WorkerLost as e:
            tail = worker.log_tail(1)[:300]
            raise WorkerFailed(f"the measuring process ended ({e.how})" + (f": {tail}" if tail else "")
                               + f" (log: {log_path})") from None
        except Exception as e:  # the job raised: its traceback is in the log
            raise WorkerFailed(f"the measuring process failed: {exception_name(e)}: {str(e)[:300]} "
                               f"(log: {log_path})") from None
