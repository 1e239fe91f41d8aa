"""Which layer went wrong: for a failing row of a zoo model, cut the source
model after each layer of its plan, convert every cut the same way (format,
quantization), run it on the same target, and compare its output with the
source's own output at that layer. The first cut that fails or drifts beyond
a threshold names the layer; where the target is a browser or a phone, the
same cut also runs on the host runtime, which tells a converter fault (wrong
everywhere) from a runtime fault (right on the host, wrong on the target).
The smallest failing cut is written into the row's bug bundle as a minimal
reproducer. A user's model file has no plan: its own graph is cut instead,
or, when the row's file has the source's format, both files are traced op by
op (deploytool.localize.file). This module orchestrates cuts; it reuses the
pipeline's converter worker and runtimes and changes no stored result.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections import OrderedDict
from dataclasses import asdict, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from deploytool import convert, zoo
from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.bugs.bundle import bundle_row
from deploytool.bugs.upstream import write_finding
from deploytool.convert.lanes import ConversionLanes, made_once
from deploytool.data.feed import Feed, save_samples
from deploytool.errors import StageFailed, UnknownOption
from deploytool.localize.file import FileSource, Point, _onnx_cut, aligned_rel_error, compare_traces, safe_name, trace
from deploytool.proc.quiet import import_tensorflow
from deploytool.provenance import package_version
from deploytool.result import Combo, Result
from deploytool.run import stored
from deploytool.run.context import RunContext
from deploytool.run.runner import artifact_dir
from deploytool.runtimes import make_runtime, runtimes_for
from deploytool.store import ResultStore, RunRecord
from deploytool.targets import all_targets, get_target
from deploytool.train.fit import export_torch
from deploytool.value import value
from deploytool.workspace import stable_hash
from deploytool.zoo.plans import BasicBlock, Flatten

SAMPLES = 32
# Relative error (max |target - source| / max |source|) beyond which a layer's output is wrong.
# Float conversions must be near exact; quantized ones carry noise of a few percent.
THRESHOLD = {"none": 1e-3, "fp16": 2e-2}
THRESHOLD_QUANTIZED = 0.25


@value(frozen=False)
class Cut:
    index: int
    layer: str
    kind: str  # the plan op: Conv, Dense, ReLU, ...
    status: str  # ok / wrong / failed
    rel_error: float | None = None
    input_rel_error: float | None = None  # the cut before it: what this op inherits rather than introduces
    host_rel_error: float | None = None  # the same cut on the host runtime, when the target is elsewhere
    reason: str = ""


@value(frozen=False)
class Localization:
    row: str
    threshold: float
    cuts: list[Cut] = field(default_factory=list)
    verdict: str = ""
    work_dir: Path | None = None  # the cuts' files, until attach_to_bundle keeps the smallest failing one

    def discard(self) -> None:
        """Remove the cuts' working files (attach_to_bundle keeps what it needs first)."""
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    @property
    def first_bad(self) -> Cut | None:
        return next((c for c in self.cuts if c.status != "ok"), None)

    def table(self) -> str:
        lines = [f"{'#':>3}  {'layer':16} {'op':10} {'status':7} {'rel. error':>11} {'on host':>9}  reason"]
        for c in self.cuts:
            fmt = lambda v: "-" if v is None else f"{v:.3g}"
            lines.append(f"{c.index:>3}  {c.layer:16} {c.kind:10} {c.status:7} {fmt(c.rel_error):>11} "
                         f"{fmt(c.host_rel_error):>9}  {c.reason[:90]}")
        return "\n".join(lines)


def _cut_points(plan: tuple) -> list[tuple[int, Any]]:
    # A cut after Flatten holds the same numbers as the cut before it, in another order.
    return [(i, op) for i, op in enumerate(plan) if not isinstance(op, Flatten)]


def _keras_layer_name(op: Any) -> str:
    return f"{op.name}_relu2" if isinstance(op, BasicBlock) else op.name


# What a cut of a zoo model holds besides its source's bytes and the op it ends at: the code that cuts and saves it
# (these files, read as bytes) and the framework that saves it. An edit to either cuts again.
_CUT_CODE = (Path(__file__), Path(zoo.__file__).with_name("torch_models.py"))


class _Source:
    """The trained source model, loaded once, cut at any point of its plan. Each cut is saved once in the workspace,
    beside the run's converted artifacts (a second localize of the same model, or another of its rows, cuts
    nothing and, its bytes unchanged, converts nothing again)."""

    def __init__(self, ctx: RunContext, framework: str):
        spec = ctx.spec
        self.framework = framework
        self.artifact = ctx.source(framework).artifact
        self._ws = ctx.ws
        self._cut_key = {"cut_of": self.artifact.sha256, "framework": framework,
                         "code": hashlib.sha256(b"".join(f.read_bytes() for f in _CUT_CODE)).hexdigest(),
                         "versions": {p: package_version(p) for p in ("keras", "torch")}}
        self.plan = zoo.layer_plan(spec.architecture, spec.num_classes)
        self.spec = spec
        if framework == "keras":
            import_tensorflow()
            import keras

            self.model = keras.saving.load_model(self.artifact.path, compile=False)
        else:
            import torch

            weights = Path(self.artifact.path).with_name("weights.pt")
            self.model = zoo.build_torch(spec.architecture, spec.hwc, spec.num_classes).eval()
            self.model.load_state_dict(torch.load(weights, weights_only=True))
        self._ops = {op.name: (i, op) for i, op in _cut_points(self.plan)}

    def points(self) -> list[Point]:
        return [Point(name, type(op).__name__) for name, (_, op) in self._ops.items()]

    def cut(self, point: Point, out_dir: Path, x: Feed) -> tuple[Artifact, np.ndarray]:
        """The model up to and including the plan's op `point`, saved as an artifact, and its outputs on x. The
        file is saved once in the workspace's folder for this cut and copied from there: its bytes, and so the key
        of its cached conversions, stay the same from one run to the next (a saved .keras file records when it was
        saved)."""
        index, op = self._ops[point.name]
        out_dir.mkdir(parents=True, exist_ok=True)
        if self.framework == "keras":
            import keras

            sub = keras.Model(self.model.inputs, self.model.get_layer(_keras_layer_name(op)).output)
            path = out_dir / "cut.keras"
            save: Callable[[Path], None] = sub.save
            ref = np.asarray(sub(x.first, training=False), np.float32)  # a few samples: no predict() loop to retrace
        else:
            import torch

            from deploytool.zoo.torch_models import ZooNet  # imports torch, like the line above

            children = list(self.model.named_children())[: index + 1]
            tsub = ZooNet(self.spec.architecture, self.spec.hwc, OrderedDict(children)).eval()
            path = out_dir / "cut.pt2"
            save = lambda p: export_torch(tsub, tuple(self.artifact.input_shape), p)
            with torch.inference_mode():
                ref = tsub(torch.from_numpy(x.first)).numpy().astype(np.float32)
        ref = ref.reshape(len(x), -1)

        def artifact(file: Path) -> Artifact:
            return Artifact(path=file, format=self.framework, framework=self.framework, layout=self.artifact.layout,
                            input_shape=tuple(self.artifact.input_shape), num_outputs=int(ref.shape[1]),
                            converter=f"deploytool.localize cut after {op.name}", sha256=content_hash(file),
                            size_bytes=size_on_disk(file))

        kept = self._ws.artifact_dir(stable_hash({**self._cut_key, "after": point.name}))

        def made() -> Artifact:
            save(kept / path.name)
            art = artifact(kept / path.name)
            art.save(kept / "artifact.json")
            return art

        shutil.copy2(made_once(kept, made).path, path)
        return artifact(path), ref


def _run(ctx: RunContext, target: str, art: Artifact, combo: Any, x: Feed) -> np.ndarray:
    """One quick untimed run of a cut on `target` (the row's target, or the host for the cross-check)."""

    t = get_target(target)
    opts = t.single_run_options(ctx.target_runtime_options(target, ctx.position(combo)))
    runtime = combo.runtime if target == combo.target else ""
    with make_runtime(target, art.format, runtime, **opts) as rt:
        rt.load(art)
        return rt.run(x).outputs


def _cut_source(ctx: RunContext, framework: str, samples_x: Any) -> tuple[Any, Any, Any]:
    """What the cuts are made of: the user's file (FileSource) or the zoo model of the row's framework; the samples
    and the calibration set in its layout."""
    user = ctx.user_artifact
    if user is not None:
        x = ctx.dataset.feed_for(samples_x, user)
        return FileSource(user, x), x, ctx.dataset.feed_for(ctx.calibration_set, user)
    source = _Source(ctx, framework)
    return source, ctx.dataset.feed_for(samples_x, source.artifact), ctx.dataset.feed_for(ctx.calibration_set,
                                                                                       source.artifact)


def _measure_cut(ctx: RunContext, converter: convert.Converter, c: Combo, cut: tuple[Any, ...], calib: Any,
                 x: Any, threshold: float, reference: str, entry: Cut) -> None:
    """One cut converted as the row was, run on the row's target (and on the host's `reference` runtime when there
    is one) and its output held against the source cut's, into `entry`; its inputs, expected and observed outputs
    saved in its folder."""
    cut_dir, art, ref, conv_dir, _ = cut
    try:
        meta = conv_dir / "artifact.json"  # converted by an earlier localize, or queued now (staged)
        converted = Artifact.load(meta) if meta.exists() else converter.convert(art, c.format, c.quantize, conv_dir,
                                                                               calib)
        shutil.copytree(conv_dir, cut_dir / "converted")  # the bundle's minimal cut holds what the target ran
        out = _run(ctx, c.target, converted, c, x)
        entry.rel_error, order = aligned_rel_error(out, ref)
        if entry.rel_error > threshold:
            entry.status, entry.reason = "wrong", f"output off by {entry.rel_error:.3g} of its range"
        if order:
            entry.reason = (entry.reason + "; " if entry.reason else "") + f"compared as {order}"
        save_samples(cut_dir, x)
        np.save(cut_dir / "expected.npy", ref.reshape(len(ref), -1))
        np.save(cut_dir / "observed.npy", out)
        if reference:
            entry.host_rel_error = aligned_rel_error(_run(ctx, reference, converted, c, x), ref)[0]
    except StageFailed as e:
        entry.status, entry.reason = "failed", f"{e.status}: {e.reason}"


def localize(ctx: RunContext, result: Result, converter: convert.Converter, samples: int = SAMPLES,
             stop_at_first: bool = True) -> Localization:
    """`converter`: the run's own, so the cuts convert in the same worker as the run's models."""

    c = result.combo
    threshold = THRESHOLD.get(c.quantize, THRESHOLD_QUANTIZED)
    loc = Localization(row=c.label, threshold=threshold)
    flipped = [f.index for f in result.comparison.flipped] if result.comparison is not None else []
    idx = list(dict.fromkeys(flipped[:samples] + list(range(len(ctx.dataset.x_test)))))[:samples]
    user, samples_x = ctx.user_artifact, ctx.dataset.x_test[idx]
    if user is not None and _traced_in_place(user, result):
        assert result.artifact is not None  # a row with no file is not traced
        return _localize_by_trace(ctx, result, loc, ctx.dataset.feed_for(samples_x, user),
                                  ctx.dataset.feed_for(samples_x, result.artifact), stop_at_first)
    source, x, calib = _cut_source(ctx, c.framework, samples_x)
    reference = _reference_target(c.target, convert.artifact_format(c.format))
    work = loc.work_dir = Path(tempfile.mkdtemp(prefix="deploytool-localize-"))
    points = list(source.points())
    # With the run's conversion lanes (ConversionLanes.prefetch), the next cut converts in the worker while this
    # one runs on the target: a cut costs the longer of the two, not their sum.
    prefetch = getattr(converter, "prefetch", None)

    def staged(n: int) -> Any:
        """Cut n saved, with its conversion queued; or the error of cutting it, raised when its turn comes."""
        try:
            cut_dir = work / f"{n:02d}-{safe_name(points[n].name)}"
            art, ref = source.cut(points[n], cut_dir / "source", x)
            # converted once per workspace, where the run's own conversions are cached (keyed by the cut's bytes)
            conv_dir = artifact_dir(ctx, art, c)
            cached = (conv_dir / "artifact.json").exists()
            job = prefetch(art, c.format, c.quantize, conv_dir, calib) if prefetch is not None and not cached else None
            return cut_dir, art, ref, conv_dir, job
        except Exception as e:
            return e

    previous: float | None = None
    try:
        upcoming = staged(0) if points else None
        for n, point in enumerate(points):
            if isinstance(upcoming, BaseException):
                raise upcoming
            assert upcoming is not None  # staged for every point
            cut = upcoming
            upcoming = staged(n + 1) if n + 1 < len(points) else None
            entry = Cut(index=n, layer=point.name, kind=point.kind, status="ok", input_rel_error=previous)
            _measure_cut(ctx, converter, c, cut, calib, x, threshold, reference, entry)
            if entry.status != "failed":
                previous = entry.rel_error
            loc.cuts.append(entry)
            if entry.status != "ok" and stop_at_first:
                job = upcoming[-1] if isinstance(upcoming, tuple) else None
                if job is not None and not job.cancel():  # the next cut is not needed: dropped if not started,
                    job.exception()  # else finished, so that nothing writes into the cuts' folder once it is gone
                break
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    loc.verdict = _verdict(loc, c.target, bool(reference))
    return loc


def _traced_in_place(user: Artifact, result: Result) -> bool:
    """A row whose file has the source's own (traceable) format is compared op by op in one run of each file
    on the host: ONNX quantized by onnxruntime on the host, or a .tflite as given wherever it ran (a .tflite
    cannot be cut into smaller models)."""

    art = result.artifact
    if art is None or art.format != user.format or user.format not in ("onnx", "tflite"):
        return False
    return user.format == "tflite" or get_target(result.combo.target).judges_itself


def _localize_by_trace(ctx: RunContext, result: Result, loc: Localization, x: Feed, x_art: Feed,
                       stop_at_first: bool) -> Localization:
    """`x`: the samples in the source's layout; `x_art`: the same in the row's file's layout."""

    user, art, c = ctx.user_artifact, result.artifact, result.combo
    assert user is not None and art is not None
    source = trace(Path(user.path), user.format, x)
    converted = trace(Path(art.path), art.format, x_art)
    compared = [(p, e) for p, e in compare_traces(source, converted) if e is not None]
    previous: float | None = None
    for n, (point, err) in enumerate(compared):
        entry = Cut(index=n, layer=point.name, kind=point.kind, status="ok", rel_error=err, input_rel_error=previous)
        if err > loc.threshold:
            entry.status, entry.reason = "wrong", f"output off by {err:.3g} of its range"
        loc.cuts.append(entry)
        previous = err
        if entry.status != "ok" and stop_at_first:
            break
    bad = loc.first_bad
    if bad is not None and user.format == "onnx":
        loc.work_dir = Path(tempfile.mkdtemp(prefix="deploytool-localize-"))
        _write_onnx_minimal(loc.work_dir / f"{bad.index:02d}-{safe_name(bad.layer)}", user, art, bad.layer, x,
                            source[bad.layer][1], converted[bad.layer][1])
    elsewhere = "" if get_target(c.target).judges_itself else c.target
    loc.verdict = _verdict_traced(loc, len(source), elsewhere)
    return loc


def _write_onnx_minimal(folder: Path, user: Artifact, art: Artifact, tensor: str, x: Feed,
                        expected: np.ndarray, observed: np.ndarray) -> None:
    """The smallest failing piece of both files: each graph pruned to what computes `tensor`."""

    for name, model in (("source", user), ("converted", art)):
        (folder / name).mkdir(parents=True)
        _onnx_cut(Path(model.path), tensor, folder / name / "cut.onnx")
    save_samples(folder, x)
    np.save(folder / "expected.npy", expected.reshape(len(x), -1))
    np.save(folder / "observed.npy", observed.reshape(len(x), -1))


def _verdict_traced(loc: Localization, traced: int, elsewhere: str) -> str:
    bad = loc.first_bad
    on_host = f" (both files traced on the host; the row ran on {elsewhere})" if elsewhere else ""
    if not loc.cuts:
        return (f"nothing was compared: none of the {traced} value(s) traced in the source model has a counterpart "
                "of the same name and size in the converted file, so this trace cannot say where the row goes "
                "wrong (the bug bundle's model and inputs still show that it does)")
    if bad is None:
        worst = max(loc.cuts, key=lambda cut: cut.rel_error or 0.0, default=None)
        most = f"; the largest is {worst.rel_error:.3g} at {worst.layer} ({worst.kind})" if worst else ""
        if elsewhere:
            return (f"the converted file is right op by op on the host ({len(loc.cuts)} of {traced} values compared"
                    f"{most}): what goes wrong on {elsewhere} is a fault of the {elsewhere} runtime")
        return (f"every op's output is within the threshold ({len(loc.cuts)} of {traced} values compared{most}): "
                "the difference builds up across ops rather than breaking at one")
    inherited = f" where its input was off by {bad.input_rel_error:.3g}" if bad.input_rel_error is not None else ""
    return (f"op {bad.layer} ({bad.kind}, #{bad.index}) is the first whose output departs from the source's: "
            f"off by {bad.rel_error:.3g} of its range{inherited}{on_host}: a fault of the converted model")


def _reference_target(target: str, artifact_format: str) -> str:
    """The target whose runtime cross-checks a cut: the host (the one that judges its own rows) when the
    row ran elsewhere and the host runs this format; "" when there is nothing to cross-check against."""

    for t in all_targets():
        if t.judges_itself and t.name != target and runtimes_for(t.name, artifact_format):
            return t.name
    return ""


def _verdict(loc: Localization, target: str, cross_check: bool) -> str:
    bad = loc.first_bad
    if bad is None:
        return ("every layer's output is within the threshold: the difference builds up across layers "
                "rather than breaking at one")
    where = f"layer {bad.layer} ({bad.kind}, cut #{bad.index})"
    if bad.input_rel_error is not None and bad.status == "wrong":
        where += f", whose input was off by {bad.input_rel_error:.3g},"
    if bad.status == "failed":
        return f"{where} is the first cut that fails: {bad.reason}"
    if cross_check and bad.host_rel_error is not None:
        if bad.host_rel_error <= loc.threshold:
            return (f"{where} is the first cut whose output is wrong on {target} (off by {bad.rel_error:.3g}) "
                    f"while the same converted file is right on the host (off by {bad.host_rel_error:.3g}): "
                    f"a fault of the {target} runtime")
        return (f"{where} is the first cut whose output is wrong, on {target} and on the host alike "
                f"(off by {bad.rel_error:.3g} / {bad.host_rel_error:.3g}): a fault of the converted model")
    return f"{where} is the first cut whose output is wrong (off by {bad.rel_error:.3g} of its range)"


def attach_to_bundle(loc: Localization, bundle: Path) -> None:
    """localization.json, a section in README.md, and the smallest failing cut as minimal/."""
    (bundle / "localization.json").write_text(json.dumps(
        {"row": loc.row, "threshold": loc.threshold, "verdict": loc.verdict,
         "cuts": [asdict(c) for c in loc.cuts]}, indent=2))
    bad = loc.first_bad
    work = loc.work_dir
    if bad is not None and work is not None:
        src = next(Path(work).glob(f"{bad.index:02d}-*"), None)
        if src is not None:
            dest = bundle / "minimal"
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest)
    readme = bundle / "README.md"
    text = readme.read_text() if readme.exists() else ""
    marker = "\n## Where it goes wrong\n"
    text = text.split(marker)[0]
    text += (marker + "\n" + loc.verdict + ".\n\nEach row is the model cut after that layer, converted and run the same "
             "way, compared with the source model's own output there (relative error = max |difference| / max "
             f"|source output|; threshold {loc.threshold:g}).\n\n```\n{loc.table()}\n```\n")
    if bad is not None:
        text += ("\n`minimal/` holds that smallest failing cut: `source/` (the cut source model), `converted/` "
                 "(what the converter made of it) and, when it ran, its `inputs.npy`, `expected.npy` and "
                 "`observed.npy`.\n")
    readme.write_text(text)


def localize_failures(ctx: RunContext, store: ResultStore, run_id: str, results: list[Result],
                      converter: convert.Converter, only: str | None = None,
                      log: Callable[[str], None] = print) -> list[tuple[Result, Localization]]:
    """Localize each failing row (of a zoo model) and attach the finding to its bug bundle."""

    done: list[tuple[Result, Localization]] = []
    with ctx.sessions():  # the cuts of web rows share one browser (the run's, inside migrate)
        for r in results:
            if not r.failing or (only and only not in r.combo.label):
                continue
            if r.triage is not None and r.triage.klass == "internal_error":
                log(f"{r.combo.label}: not localized: a deploytool bug, not the model's ({r.triage.why})")
                continue
            log(f"localizing {r.combo.label} ...")
            try:
                loc = localize(ctx, r, converter)
            except UnknownOption as e:  # this row's model cannot be taken apart here: the others still can
                log(f"{r.combo.label}: not localized: {e}")
                continue
            if not r.bundle:
                bundle_row(ctx, r, run_id)
                stored.save(store, ctx.ws, r)
            if r.bundle:
                attach_to_bundle(loc, Path(r.bundle))
            loc.discard()
            log(f"{r.combo.label}: {loc.verdict}\n{loc.table()}")
            done.append((r, loc))
    return done


def localize_run(run: RunRecord, store: ResultStore, ws: Any, only: str | None = None,
                 log: Callable[[str], None] = print) -> list[tuple[Result, Localization]]:
    """Localize the failing rows of a stored run (optionally those whose label contains `only`)."""

    ctx = stored.context_for_stored_run(run, ws)
    run_id = run.run_id
    rows = stored.stored_results(store, ws, run_id)
    with ConversionLanes(ws.root / "logs", f"localize-{run_id}", ctx.req.timeout_s) as conv:
        found = localize_failures(ctx, store, run_id, rows, conv, only, log)
    if not found:
        matching = f" matching {only!r}" if only else ""
        failing = sum(1 for r in rows if r.failing and (not only or only in r.combo.label))
        if failing:  # each said above why it could not be taken apart
            raise UnknownOption(f"run {run_id}: none of its {failing} failing row(s){matching} could be localized "
                                "here (the reason is above)")
        raise UnknownOption(f"run {run_id} has no failing row{matching} to localize; `deploytool report RUN` lists "
                            "its rows")
    stored.write_report(ctx, store, run_id, stored.stored_results(store, ws, run_id))
    _refresh_findings(store, ws, {r.bundle for r, _ in found if r.bundle})
    return found


def _refresh_findings(store: ResultStore, ws: Any, bundles: set[str]) -> None:
    """Rewrite the folders of findings whose bundle just gained a localization (its minimal cut)."""

    for f in store.findings():
        if f.bundle in bundles:
            write_finding(f, ws.finding_dir(f.id), ws.blob_dir())
