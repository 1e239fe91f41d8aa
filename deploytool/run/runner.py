"""The combination runner: one `Combo` -> one `Result`. Convert (cached by
content), run on the target's runtime, judge. A fault in the combination is
the combination's result; only faults that every combination would hit (no
browser, no device, a failing workspace) stop the run. It writes the row's
output arrays and nothing else: storing, bug bundles and reports are the
caller's side effects."""

from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback
from pathlib import Path
from typing import Iterator

import numpy as np

from deploytool import convert
from deploytool.convert.lanes import made_once
from deploytool.artifact import Artifact
from deploytool.latency import MIN_CLEAN_BLOCKS, PairedLatency, floor_of, quiet_blocks
from deploytool.errors import (BadModelFile, DeploytoolError, DeviceNotFound, HarnessMissing, Raised, StageFailed,
                               first_line_of)
from deploytool.provenance import PACKAGES, package_version
from deploytool.result import Combo, Result, Status
from deploytool.run.baseline import cached_baseline
from deploytool.run.context import RunContext, Source
from deploytool.run.judge import judge, paired_ratios
from deploytool.run.usermodel import QUANTIZED_IO
from deploytool.runtimes import runtime_class
from deploytool.runtimes.base import MIN_TIMED_SAMPLES, Outputs, Runtime
from deploytool.runtimes.isolated import load_and_run, paired_latency
from deploytool.runtimes.measure import PAIR_BLOCKS, PairingTooLong
from deploytool.tasks.weak_set import JUDGED_INSTEAD, weak_set_tolerances
from deploytool.workspace import Workspace, stable_hash


ARTIFACT_SCHEME = 2


def artifact_dir(ctx: RunContext, source: Artifact, combo: Combo) -> Path:
    """Where the conversion of `source` for `combo` is cached (by content and converter versions)."""
    key = stable_hash({"source": source.sha256, "format": combo.format, "quantize": combo.quantize,
                       "calibration": ctx.calibration_sha256,
                       "versions": {p: package_version(p) for p in PACKAGES},
                       # what an artifact records of itself changed (v2: channels-last outputs, fallbacks)
                       "artifact_scheme": ARTIFACT_SCHEME})
    return ctx.ws.artifact_dir(key)


def convert_cached(ctx: RunContext, converter: convert.Converter, source: Artifact, combo: Combo) -> Artifact:
    """`combo`'s artifact made from the `source` model: converted ahead, cached, or converted now."""
    out = artifact_dir(ctx, source, combo)
    queued = getattr(converter, "wait_for", None)
    art = queued(out) if queued is not None else None  # converted ahead (convert/lanes.py)
    if art is not None:
        return art

    def make() -> Artifact:
        if convert.plan(source.format, combo.format, combo.quantize).steps == ("passthrough",):
            # A user's file already in the asked format is copied: no framework to isolate, no worker to start.
            return convert.convert(source, combo.format, combo.quantize, out, None)
        calib = ctx.dataset.feed_for(ctx.calibration_set, source)
        return converter.convert(source, combo.format, combo.quantize, out, calib)

    return made_once(out, make)  # cached, or made now (a second run on this workspace waits, then finds it made)


def _routed(combos: list[Combo], framework: str, source: Artifact) -> Iterator[tuple[Combo, type[Runtime], tuple]]:
    """(combo, runtime class, conversion steps) of each of `framework`'s combos that has both (a refused row
    has neither: it reports itself)."""

    for c in combos:
        if c.framework != framework:
            continue
        try:
            steps = convert.plan(source.format, c.format, c.quantize).steps
            cls = runtime_class(c.target, convert.artifact_format(c.format), c.runtime)
        except (StageFailed, DeploytoolError):
            continue
        yield c, cls, steps


def conversions_ahead(ctx: RunContext, combos: list[Combo], framework: str, source: Artifact) -> list[tuple]:
    """(fmt, quantize, out dir, calibration) of each conversion `combos` of `framework` will need that is not
    cached yet: those a row would start in the converter worker (never passthrough copies or refused rows)."""
    jobs, seen = [], set()
    for c, _, steps in _routed(combos, framework, source):
        if (c.format, c.quantize) in seen:
            continue
        out = artifact_dir(ctx, source, c)
        if steps == ("passthrough",) or (out / "artifact.json").exists():
            continue
        seen.add((c.format, c.quantize))
        jobs.append((c.format, c.quantize, out, ctx.dataset.feed_for(ctx.calibration_set, source)))
    return jobs


def runtimes_ahead(ctx: RunContext, combos: list[Combo], framework: str, source: Artifact) -> list[type]:
    """The runtime classes `combos` of `framework` will run on, and the PC baseline's when it is not measured
    yet: what a run starts (and imports) while the conversions finish."""

    classes: list[type] = []
    req = ctx.req
    if cached_baseline(source, ctx.dataset, warmup_runs=req.warmup_runs, latency_samples=req.latency_samples,
                       threads=req.threads, scored=ctx.spec.scored_output) is None:
        classes.append(runtime_class("pc", source.format))
    for c, cls, steps in _routed(combos, framework, source):
        if steps == ("passthrough",) and _same_as_baseline(ctx, c, cls, source):
            continue  # the row reuses the baseline's measurement (baseline_reusable): nothing runs
        classes.append(cls)
    return list(dict.fromkeys(classes))


def pairing_ahead(ctx: RunContext, combos: list[Combo], framework: str, source: Artifact) -> list[type[Runtime]]:
    """The runtime classes of `framework`'s rows that will be timed beside the PC baseline (pair_with_baseline),
    the baseline's first: what a run's pairing worker imports while the conversions finish ([] for none)."""
    ref_cls = runtime_class("pc", source.format)
    if not ref_cls.in_process:
        return []
    targets: list[type[Runtime]] = []
    for c, cls, steps in _routed(combos, framework, source):
        samples = ctx.runtime_options(c).get("latency_samples")
        if not cls.in_process or (samples is not None and samples < MIN_TIMED_SAMPLES):
            continue
        if steps == ("passthrough",) and _same_as_baseline(ctx, c, cls, source):
            continue  # the baseline's own measurement: not paired
        targets.append(cls)
    return [ref_cls, *dict.fromkeys(targets)] if targets else []


def _same_as_baseline(ctx: RunContext, combo: Combo, cls: type, source: Artifact) -> bool:
    """The runtime and settings of the PC baseline: with the baseline's own file, baseline_reusable."""

    if cls is not runtime_class("pc", source.format):
        return False
    opts, req = ctx.runtime_options(combo), ctx.req
    return (opts.get("threads"), opts.get("warmup_runs"), opts.get("latency_samples")) == \
        (req.threads, req.warmup_runs, req.latency_samples)


def baseline_reusable(ctx: RunContext, combo: Combo, artifact: Artifact, src: Source) -> bool:
    """The row would run the baseline's own file in the baseline's own runtime with the same settings
    (a user's .onnx / .tflite on the host): its outputs and latency are the baseline's, measured once."""
    if artifact.sha256 != src.artifact.sha256 or artifact.format != src.artifact.format:
        return False
    return _same_as_baseline(ctx, combo, runtime_class(combo.target, artifact.format, combo.runtime), src.artifact)


def baseline_outputs(src: Source) -> Outputs:
    b = src.baseline
    measured = [n for n in (b.provenance.get("notes") or []) if isinstance(n, str)]
    return Outputs(outputs=b.outputs(), latency_ms=np.load(b.latency_samples_path, allow_pickle=False),
                   memory_bytes=dict(b.memory_bytes), load_ms=b.load_ms, first_inference_ms=b.first_inference_ms,
                   throughput_sps=b.throughput_sps, environment=dict(b.provenance.get("runtime") or {}),
                   inferences_per_reading=int((b.provenance.get("runtime") or {}).get("latency_inferences_per_reading")
                                              or 1),
                   output_layout=b.layout,
                   notes=[*measured, "the baseline's own file on the baseline's own runtime and settings: outputs, "
                          "latency and memory are the baseline's, measured once and not run again"])


def pair_with_baseline(ctx: RunContext, combo: Combo, artifact: Artifact,
                       src: Source) -> tuple[PairedLatency | None, str]:
    """The row's latency timed against the PC baseline's model in alternating blocks (deploytool.latency), or
    None and why not: a runtime outside this machine's Python processes (a browser, a phone) keeps its own
    timing. A pairing that fails costs the row its paired ratio, never its result."""
    cls = runtime_class(combo.target, artifact.format, combo.runtime)
    ref_cls = runtime_class("pc", src.artifact.format)
    if not cls.in_process or not ref_cls.in_process:
        return None, (f"the {cls.name} runtime runs outside this machine's Python processes, so the PC baseline "
                      "cannot be timed beside it")
    options, req = ctx.runtime_options(combo), ctx.req
    samples = options.get("latency_samples")
    if samples is not None and samples < MIN_TIMED_SAMPLES:
        return None, "an untimed run"
    ref_options = {"threads": req.threads, "warmup_runs": req.warmup_runs}
    try:
        return paired_latency(cls, options, artifact, ctx.dataset.feed_for(ctx.dataset.x_test, artifact),
                              ref_cls, ref_options, src.artifact,
                              ctx.dataset.feed_for(ctx.dataset.x_test, src.artifact),
                              f"the PC baseline ({src.framework})"), ""
    except PairingTooLong as e:  # a model too slow to time in blocks within a row's budget
        return None, f"{e}: timed alone"
    except Exception as e:  # the row was measured; only its pairing failed
        first = first_line_of(str(e), 200)
        return None, f"timing it beside the PC baseline failed ({type(e).__name__}: {first})"


# Rounds of `pair_again`: a row whose paired timing never saw the machine quiet is timed again at most this often.
PAIR_AGAIN_ROUNDS = 2


def _floors(results: list[Result]) -> dict[str, float]:
    """Each baseline's reference floor over `results`: the fastest reference block any of its rows timed."""
    floors: dict[str, float] = {}
    for r in results:
        p = r.measurement.paired if r.measurement is not None else None
        if p is not None:
            floors[r.baseline_framework] = floor_of(p.reference_block_ms, floors.get(r.baseline_framework, math.nan))
    return floors


def _quiet(p: PairedLatency | None, floors: dict[str, float], framework: str) -> int:
    return 0 if p is None else quiet_blocks(p.target_block_ms, p.reference_block_ms, floors.get(framework, math.nan))


def pair_again(ctx: RunContext, results: list[Result]) -> list[Result]:
    """The rows of `results` (fully timed, PAIR_BLOCKS blocks or more) whose paired timing never saw the machine
    quiet — fewer than MIN_CLEAN_BLOCKS blocks clean against their baseline's floor over the whole run, which a
    row timed before the floor was known or during a co-tenant's seconds-long burst has — timed beside the
    baseline again, up to PAIR_AGAIN_ROUNDS times; a new timing replaces the row's when more of its blocks are
    quiet. Returns the rows that changed (their latency ratio and interval; nothing else of the row moves)."""

    def paired(r: Result) -> PairedLatency | None:
        measured = r.status == Status.MEASURED and r.artifact is not None and r.comparison is not None
        p = r.measurement.paired if measured and r.measurement is not None else None
        return p if p is not None and p.blocks >= PAIR_BLOCKS else None

    rows = [r for r in results if paired(r) is not None]
    changed: dict[str, Result] = {}
    for _ in range(PAIR_AGAIN_ROUNDS):
        floors = _floors(rows)
        todo = [r for r in rows if _quiet(paired(r), floors, r.baseline_framework) < MIN_CLEAN_BLOCKS]
        if not todo:
            break
        for r in todo:
            assert r.artifact is not None and r.measurement is not None and r.comparison is not None  # `paired`
            new, _ = pair_with_baseline(ctx, r.combo, r.artifact, ctx.source(r.combo.framework))
            if new is None or (_quiet(new, floors, r.baseline_framework)
                               <= _quiet(paired(r), floors, r.baseline_framework)):
                continue
            r.measurement = dataclasses.replace(r.measurement, paired=new)
            r.comparison = paired_ratios(r.comparison, new)
            if new.others_busy_fraction is not None:
                r.environment["cpu_busy_fraction_during_timing"] = new.others_busy_fraction
            changed[r.combo_key] = r
    return list(changed.values())


def judged_quantized(combo: Combo, src: Source) -> bool:
    """Whether the row is held to the quantized group's limits: a quantized row, or any row of a source that itself
    computes in integers (deploytool.tolerances.source_tolerances)."""
    return combo.quantized or bool(src.artifact.options.get(QUANTIZED_IO))


def row_notes(ctx: RunContext, combo: Combo, artifact: Artifact, outputs: Outputs, src: Source,
              agreement_uninformative: str = "") -> list[str]:
    """The artifact's and the runtime's notes, then what the run adds: the calibration set of an int8 row, the
    tolerances a source that is itself quantized is judged by (deploytool.tolerances.source_tolerances), and
    why agreement says nothing on a weak test set (deploytool.tasks.weak_set)."""
    notes = list(artifact.notes) + list(outputs.notes)
    if ctx.calibration_note and combo.quantize in ("int8", "int8-io"):
        notes.append(ctx.calibration_note)
    if not combo.quantized and src.artifact.options.get(QUANTIZED_IO):
        notes.append("judged by the quantized tolerances: the source model itself computes in integers (its I/O "
                     "tensors are quantized), and kernels round integer arithmetic differently")
    if agreement_uninformative:
        notes.append(f"weak test set: {agreement_uninformative}: {JUDGED_INSTEAD}")
    return notes


def _kept(ws: Workspace, outputs: Outputs, run_id: str, key: str) -> tuple[str, str]:
    """The row's outputs and latency samples saved in the workspace: their paths."""
    out_path = ws.outputs_path(run_id, key)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(out_path, outputs.outputs)
    lat_path = out_path.with_suffix(".latency.npy")
    np.save(lat_path, outputs.latency_ms)
    return str(out_path), str(lat_path)


def _judged(ctx: RunContext, r: Result, outputs: Outputs, src: Source, paired: PairedLatency | None) -> bool:
    """The row's outputs judged against its baseline (its comparison, measurement and the limits it was judged by
    into `r`); False, the row RUNTIME_FAILED, when they cannot be laid beside the baseline's (triage says whose
    fault)."""
    assert r.artifact is not None
    t = time.perf_counter()
    try:
        quantized = judged_quantized(r.combo, src)
        r.comparison, r.measurement = judge(outputs, src.reference, ctx.dataset.y_test, r.tolerances,
                                            r.artifact.size_bytes, ctx.spec.task, paired, ctx.spec.scored_output,
                                            r.artifact.signature.integer_outputs, quantized)
        if r.comparison.agreement_uninformative:  # the limits it was judged by, as the row keeps them
            r.tolerances = weak_set_tolerances(r.tolerances, quantized)
    except ValueError as e:
        r.status = Status.RUNTIME_FAILED
        r.reason = f"its outputs do not match the PC baseline's: {e}"
        r.environment = dict(outputs.environment)
        r.traceback, r.raised = traceback.format_exc(limit=30), Raised.of(e)
        return False
    r.output_layout = outputs.output_layout
    r.times.compare = time.perf_counter() - t
    return True


def run_combination(ctx: RunContext, converter: convert.Converter, combo: Combo, run_id: str, key: str) -> Result:
    r = Result(run_id=run_id, combo_key=key, model=ctx.spec.name, dataset=ctx.dataset.name, combo=combo,
               status=Status.ERROR, tolerances=dict(ctx.tolerance_for(combo)))
    try:
        r.plan = convert.plan(combo.framework, combo.format, combo.quantize)
        artifact_format = r.plan.artifact_format
        runtime_class(combo.target, artifact_format, combo.runtime)  # not_applicable before converting
        src = ctx.source(combo.framework)
        r.baseline_framework = src.framework
        t = time.perf_counter()
        r.artifact = convert_cached(ctx, converter, src.artifact, combo)
        r.times.convert = time.perf_counter() - t
        t = time.perf_counter()
        paired, not_paired = None, ""
        if baseline_reusable(ctx, combo, r.artifact, src):
            outputs = baseline_outputs(src)
            not_paired = ("the baseline's own file on the baseline's own runtime: its latency is the baseline's, "
                          "ratio 1 by definition")
        else:
            outputs = load_and_run(combo.target, r.artifact.format, combo.runtime, r.artifact,
                                   ctx.dataset.feed_for(ctx.dataset.x_test, r.artifact),
                                   **ctx.runtime_options(combo))
            paired, not_paired = pair_with_baseline(ctx, combo, r.artifact, src)
        r.times.runtime = time.perf_counter() - t
    except StageFailed as e:
        r.status, r.reason = Status(e.status), e.reason
        cause = e.__cause__ if type(e.__cause__).__name__ != "_RemoteTraceback" else None
        r.raised = e.raised if e.raised is not None else (Raised.of(cause) if cause is not None else None)
        return r
    except (HarnessMissing, DeviceNotFound, BadModelFile):
        raise  # the machine lacks what every combination needs, or the user's own file does not run: exit 2
    except OSError as e:
        if is_workspace_fault(ctx.ws, e):
            raise  # the workspace itself failed (full, read-only): the run stops, resumable
        r.reason, r.traceback = f"{type(e).__name__}: {e}", traceback.format_exc(limit=20)
        r.raised = Raised.of(e)
        return r
    except DeploytoolError as e:
        r.reason = str(e)  # a user-level problem confined to this combination (a device refusing one model)
        return r
    except Exception as e:  # a crash: the row's result (triage tells deploytool's own bugs from upstream's)
        r.reason = f"{type(e).__name__}: {first_line_of(str(e))}".rstrip(": ")
        r.traceback, r.raised = traceback.format_exc(limit=30), Raised.of(e)
        return r
    if not _judged(ctx, r, outputs, src, paired):
        return r
    r.status, r.environment = Status.MEASURED, dict(outputs.environment)
    if not_paired and r.measurement is not None:
        r.measurement = dataclasses.replace(r.measurement, not_paired=not_paired, is_baselines=outputs is not None
                                            and baseline_reusable(ctx, combo, r.artifact, src))
    if paired is not None and paired.others_busy_fraction is not None:  # the lab judges latency by it too
        r.environment["cpu_busy_fraction_during_timing"] = paired.others_busy_fraction
    assert r.comparison is not None  # _judged set it
    r.notes = row_notes(ctx, combo, r.artifact, outputs, src, r.comparison.agreement_uninformative)
    r.outputs_path, r.latency_path = _kept(ctx.ws, outputs, run_id, key)
    return r


def is_workspace_fault(ws: Workspace, e: OSError) -> bool:
    """An OSError about a file of the workspace (full disk, read-only, removed folder)."""
    name = e.filename or ""
    try:
        real = Path(os.path.realpath(name)) if name else None
    except (OSError, ValueError):
        return False
    return real is not None and (real == ws.root or ws.root in real.parents)
