"""The migrate run, end to end: check the request and every target's
preflight, plan the matrix by asking the targets, then for each combination
run it (deploytool.run.runner), keep a bug bundle of a failing row, store the row as soon
as it exists — and finally report. A fault in one combination is that
combination's result; the matrix goes on.

This module orchestrates; building the shared context, running a combination,
judging, storing and reporting each live in their own module.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import time
from dataclasses import field
from math import prod
from pathlib import Path
from typing import Any, Callable

from deploytool import convert
from deploytool.bugs.bundle import fallback_of
from deploytool.bugs.findings import mark_peer_outliers, settle_row
from deploytool.bugs.triage import installed_environment
from deploytool.bugs.upstream import fold_findings
from deploytool.convert.lanes import ConversionLanes
from deploytool.errors import DeploytoolError, StageFailed, UnknownOption, WorkspaceError
from deploytool.modelfiles.signature import Signature
from deploytool.provenance import host_facts, host_identity
from deploytool.report.pairs import backend_pairs, row_of
from deploytool.result import Combo, Result, Status
from deploytool.run import stored
from deploytool.run.context import RunContext
from deploytool.run.request import MigrateRequest
from deploytool.run.runner import (
    conversions_ahead,
    is_workspace_fault,
    pairing_ahead,
    pair_again,
    run_combination,
    runtimes_ahead,
)
from deploytool.runtimes import check_runtime_names, runtimes_for
from deploytool.runtimes.isolated import log_runtime_workers, runtime_workers, warm_pairing, warm_workers
from deploytool.store import ResultStore, open_store
from deploytool.targets import expand, get_target, selectable
from deploytool.value import value
from deploytool.workspace import Workspace, check_name, stable_hash

# A run id is <model name, cut to this>-<12 hex> (or -<timestamp>-<8 hex> with --fresh): at most 64 characters.
RUN_NAME_CHARS = 40

__all__ = ["MigrateRequest", "RunOutcome", "migrate", "plan_matrix"]


@value(frozen=False)
class RunOutcome:
    run_id: str
    results: list[Result]
    report_paths: Any  # report.ReportPaths, or None when reporting failed
    reused: int  # combinations taken from the store instead of measured again
    seconds_total: float
    seconds_in_runtimes: float
    seconds_converting: float
    seconds_report: float
    baselines: dict[str, Any] = field(default_factory=dict)  # framework -> its PC Baseline on this run's test set

    @property
    def failing(self) -> list[Result]:
        return [r for r in self.results if r.failing]


def requested_targets(req: MigrateRequest) -> list[str]:
    return expand(req.targets, selectable(), "target")


def plan_matrix(ctx: RunContext, targets: list[str]) -> list[Combo]:
    """Every combination the request names, in a stable order, each target giving its own axes."""

    req, spec = ctx.req, ctx.spec
    frameworks = expand(req.frameworks, spec.frameworks, "framework")
    formats = expand(req.formats, convert.FORMATS, "format")
    all_quant = "all" in req.quantize
    words = [] if all_quant else expand(req.quantize, convert.QUANTIZE_WORDS, "quantization")
    chosen = [r for v in req.runtimes for r in str(v).split(",") if r.strip()]
    check_runtime_names([r for r in chosen if r != "all"])
    combos: list[Combo] = []
    for fw in frameworks:
        for fmt in formats:
            available = convert.quantize_modes(fw, fmt)
            if not available and "all" in req.formats:
                continue  # `--format all` means the formats this source has
            modes = (available or ("none",)) if all_quant else words
            artifact_format = convert.artifact_format(fmt)
            for q in modes:
                for name in targets:
                    target = get_target(name)
                    offered = runtimes_for(name, artifact_format)
                    if "all" in req.formats and not offered:
                        continue  # `--format all` means the formats that run on the target
                    for runtime in _runtimes(chosen, offered):
                        for pos in target.positions(ctx.target_options[name], ctx.preflight[name], artifact_format):
                            combos.append(Combo(fw, fmt, q, name, pos.device, pos.backend, runtime))
    _refuse_if_nothing_possible(combos, ctx.signature)
    if not combos:
        raise UnknownOption("the request names no combination to run; check --format/--quantize/--target/--runtime")
    return combos


LARGE_OUTPUTS_BYTES = 1 << 30  # a run storing more says so before it starts


def stored_outputs_bytes(sig: Signature, samples: int, rows: int, baselines: int = 0) -> tuple[int, str]:
    """About how many bytes `rows` rows and `baselines` baselines of `samples` samples keep as outputs (float32,
    every output side by side; a dimension the model leaves open counted as 1), and how that was counted."""
    values = sum(prod(d or 1 for d in t.sample_shape) for t in sig.outputs) or 1
    kept = f"{rows} row(s)" + (f" and {baselines} baseline(s)" if baselines else "")
    return (rows + baselines) * samples * values * 4, f"{kept} x {samples} samples x {values:,} float32 values a sample"


def _runtimes(chosen: list[str], offered: list[str]) -> list[str]:
    """"" is the default runtime; --runtime picks among those offered (a format none of them runs keeps its default)."""
    if not chosen or not offered:
        return [""]
    if "all" in chosen:
        return ["", *offered[1:]]
    picked = [("" if r == offered[0] else r) for r in chosen if r in offered]
    return picked or [""]


def _refuse_if_nothing_possible(combos: list[Combo], sig: Signature) -> None:
    """A request whose every combination is impossible is a user mistake (exit 2), not a run of empty rows: int8-io
    for a model whose inputs are integers already (whatever the format; said first), or a quantization a route
    lacks."""
    model_reasons, route_reasons = [], []
    for c in {(c.framework, c.format, c.quantize) for c in combos}:
        try:
            convert.refuse_integer_io_for_integer_inputs(sig, c[2])
        except StageFailed as e:
            model_reasons.append(e.reason)
            continue
        try:
            convert.plan(*c)
            return
        except StageFailed as e:
            route_reasons.append(e.reason)
    if model_reasons or route_reasons:
        raise UnknownOption(sorted(model_reasons)[0] if model_reasons else sorted(route_reasons)[0])


def judged_as(ctx: RunContext) -> str:
    """What a run's rows are judged against, by content: the model (and its task, tolerances, scored output), the
    test data, the sources and the request's own tolerances. A run id given again must mean the same."""
    req = ctx.req
    sources = {fw: ctx.source_id(fw) for fw in expand(req.frameworks, ctx.spec.frameworks, "framework")}
    return stable_hash({"spec": ctx.spec.content_hash(), "data": ctx.dataset.sha256, "sources": sources,
                        "tolerances": ctx.tolerances, "task": req.task, "output": req.output}, 16)


def refuse_another_run_under_this_id(store: ResultStore, run_id: str, ctx: RunContext) -> None:
    """`--run-id` naming a stored run of another model, data or judgement (task, tolerances): its rows would be
    mixed with this one's, or kept under verdicts this request does not ask for."""
    before = store.get_run(run_id)
    if before is None or before.run_id != run_id:
        return
    stored = before.request.get("judged_as")
    if stored is not None and stored != judged_as(ctx):
        raise UnknownOption(f"--run-id {run_id} holds a run of {before.model or 'another model'} judged otherwise "
                            "(another model, test set, task, output or tolerances); give this run another --run-id")


def run_id_for(ctx: RunContext, host_id: str) -> str:
    req = ctx.req
    if req.run_id:
        return check_name(req.run_id, "--run-id")
    name = ctx.spec.name[:RUN_NAME_CHARS]
    if req.fresh:  # unique even for two runs started in the same second on the same host
        return f"{name}-{dt.datetime.now():%Y%m%d%H%M%S}-{os.urandom(4).hex()}"
    request = req.to_json()
    for k in ("fresh", "run_id", "model", "test_npz", "data_dir", "localize"):
        request.pop(k, None)  # the inputs enter by content below, not by path
    for unset in ("data_layout", "task", "output"):
        if request.get(unset) is None:
            request.pop(unset, None)  # the data's bytes decide; ids of runs made before the flag hold
    if not request.get("random_weights"):
        request.pop("random_weights", None)  # ids of runs made before the flag hold
    sources = {fw: ctx.source_id(fw) for fw in expand(req.frameworks, ctx.spec.frameworks, "framework")}
    ident = {"spec": ctx.spec.content_hash(), "data": ctx.dataset.sha256, "sources": sources, "host": host_id,
             "targets": {t: ctx.identity(t) for t in sorted(ctx.preflight)}, "request": request}
    return f"{name}-{stable_hash(ident, 12)}"


def resume_order(todo: list[Combo], keys: dict[Combo, str], timed_out: set[str]) -> list[Combo]:
    """The rows a resumed run still has to measure, in the plan's order, except that a row whose stored result is a
    timeout goes after the others. A timeout is retried (it may have been a hang), but a row too slow for its limit
    would otherwise spend its limit again before any new row is measured: the full atlas re-ran ConvNeXt-Tiny's
    web int8 row, which its pace stopped at 764 s, first at every resume."""
    return sorted(todo, key=lambda c: keys[c] in timed_out)  # stable: the plan's order within each part


class _Run:
    """One migrate run over its matrix; every side effect (store, bundle, report) goes through deploytool.run.stored."""

    def __init__(self, ctx: RunContext, store: ResultStore, log: Callable[[str], None]):
        self.ctx, self.store, self.log = ctx, store, log

    def run(self, combos: list[Combo], run_id: str, keys: dict[Combo, str]) -> RunOutcome:
        ctx, store = self.ctx, self.store
        t_start = time.perf_counter()
        # a run that completed before had its failing rows folded into the findings then: only rows measured now
        # are new sightings (a re-run that reuses every row counts nothing twice)
        before = store.get_run(run_id)  # (or the one run whose id starts with it)
        folded_before = before is not None and before.run_id == run_id and before.status == "complete"
        todo = self._todo(combos, keys, run_id, resumed=before is not None)
        self._check_room(todo)
        # a finished run asked again, with nothing to measure or localize: its stored record stays as it is
        untouched = folded_before and not todo and not ctx.req.localize
        if not untouched:
            store.start_run(run_id, ctx.spec.name, {
                **ctx.req.to_json(), "host": host_facts(), "combos": len(combos), "judged_as": judged_as(ctx),
                "planned_targets": sorted(ctx.preflight), "identity": {t: ctx.identity(t) for t in sorted(ctx.preflight)}})
        reused = len(combos) - len(todo)
        if reused:
            self.log(f"run {run_id}: {reused} of {len(combos)} combinations already measured; "
                     f"running the other {len(todo)}")
        bar = _progress(todo, ctx.progress)
        converter = ConversionLanes(ctx.ws.root / "logs", run_id, ctx.req.timeout_s)
        log_runtime_workers(ctx.ws.root / "logs" / f"runtime-{run_id}.log")  # their native output, as conversions'
        try:
            with ctx.sessions():  # what each target's rows share (one browser, the runtimes' workers)
                in_runtimes, converting = self._measure_rows(converter, todo, bar, run_id, keys)
                if ctx.req.localize:
                    # localize's machinery (its layer probes per framework) loads for a run that asks for it
                    # (bench/bench_user_onnx.py: a migrate start-up without it)
                    from deploytool.localize import localize_failures

                    localize_failures(ctx, store, run_id, stored.stored_results(store, ctx.ws, run_id), converter,
                                      log=self.log)
        except (KeyboardInterrupt, DeploytoolError):
            self._interrupted(run_id)
            raise
        except OSError as e:
            if not is_workspace_fault(ctx.ws, e):
                raise
            self._interrupted(run_id)
            raise WorkspaceError(f"the workspace {ctx.ws.root} failed mid-run ({e.strerror or type(e).__name__}: "
                                 f"{e.filename}); results measured so far are kept: free space or fix permissions, "
                                 "then run the same command again to resume") from None
        finally:
            bar.close()
            converter.close()
        if not untouched:
            store.finish_run(run_id)
        order = {keys[c]: i for i, c in enumerate(combos)}
        results = sorted((r for r in stored.stored_results(store, ctx.ws, run_id) if r.combo_key in order),
                         key=lambda r: order[r.combo_key])
        measured_now = {keys[c] for c in todo}
        if ctx.req.random_weights:  # now that every route of the run is measured: a route far off its peers
            measured_now |= self._peer_outliers(run_id, results)
        fold_findings(store, ctx.ws, run_id, [r for r in results if not folded_before or r.combo_key in measured_now],
                      self.log)
        t = time.perf_counter()
        paths = stored.write_report(ctx, store, run_id, results)
        t_report = time.perf_counter() - t
        return RunOutcome(run_id, results, paths, reused, time.perf_counter() - t_start,
                          in_runtimes, converting, t_report, {fw: s.baseline for fw, s in ctx.sources.items()})

    def _todo(self, combos: list[Combo], keys: dict[Combo, str], run_id: str, resumed: bool) -> list[Combo]:
        """The rows still to measure: those without a final stored result, in the plan's order; in a resumed run,
        the ones that ran out of their time limit before go last (resume_order)."""
        done = self.store.final_keys(run_id)
        todo = [c for c in combos if keys[c] not in done]
        if resumed and todo:
            todo = resume_order(todo, keys, {r.combo_key for r in self.store.results_for(run_id)
                                             if r.status is Status.TIMEOUT})
        return todo

    def _check_room(self, todo: list[Combo]) -> None:
        """Every row keeps its outputs: a run whose outputs cannot fit on the workspace's disk is refused in one line
        before anything is measured (a real-size decoder's logits: 412 MB a row at 16 samples); a large one says
        what it will take."""
        ctx = self.ctx
        frameworks = {c.framework for c in todo} - set(ctx.sources)  # baselines not measured yet keep theirs too
        need, how = stored_outputs_bytes(ctx.signature, len(ctx.dataset.x_test), len(todo), len(frameworks))
        free = shutil.disk_usage(ctx.ws.root).free
        if need > free:
            raise WorkspaceError(f"this run would store about {need / 2**30:,.1f} GiB of outputs ({how}) but the "
                                 f"workspace's disk has {free / 2**30:,.1f} GiB free: pass --test-samples, fewer "
                                 "--format/--quantize/--target, or a --workspace on a larger disk")
        if need > LARGE_OUTPUTS_BYTES:
            self.log(f"this run stores about {need / 2**30:,.1f} GiB of outputs ({how}); "
                     f"{free / 2**30:,.1f} GiB free on the workspace's disk")

    def _measure_rows(self, converter: ConversionLanes, todo: list[Combo], bar: Any, run_id: str,
                      keys: dict[Combo, str]) -> tuple[float, float]:
        """Every row still to measure (`bar` over them), each settled (triaged, a bundle for a failing one) and
        stored as it ends; then the rows timed while the machine was never quiet, timed again. Returns the seconds
        spent in runtimes and in converting."""
        ctx, store = self.ctx, self.store
        in_runtimes, converting = 0.0, self._convert_ahead(converter, todo)
        ran: list[Result] = []
        for combo in bar:
            bar.set_postfix_str(combo.label, refresh=True)
            result = run_combination(ctx, converter, combo, run_id, keys[combo])
            if result.failing or departs_from_twin(result, ran) or fallback_of(result) is not None:
                settle_row(ctx, result, run_id, installed_environment())
            ran.append(result)
            t = time.perf_counter()
            stored.save(store, ctx.ws, result)
            result.times.store = time.perf_counter() - t
            in_runtimes += result.times.runtime
            converting += result.times.convert
        for result in pair_again(ctx, ran):  # latency timed while the machine was never quiet
            stored.save(store, ctx.ws, result)
        return in_runtimes, converting

    def _convert_ahead(self, lanes: ConversionLanes, todo: list[Combo]) -> float:
        """Every conversion the rows will need, before any row is measured: each framework's in its own
        worker as soon as its source is trained (the sources train side by side), so nothing converts
        while latency is timed; returns the seconds spent waiting for them. A source that fails to train is
        left to its rows, which report it. Meanwhile the rows' runtime workers start."""
        from concurrent.futures import ThreadPoolExecutor, as_completed

        frameworks = list(dict.fromkeys(c.framework for c in todo))
        # The twins train side by side, each in its own process pinned to its thread count (the models are those
        # of training one after the other); each framework's conversions start as soon as its own source is ready.
        pool = ThreadPoolExecutor(max(1, len(frameworks)), thread_name_prefix="deploytool-train")
        warm: list[type] = []
        pairing: list[list[type]] = []
        try:
            started = {pool.submit(self.ctx.source_model, fw): fw for fw in frameworks}
            for done in as_completed(started):
                fw = started[done]
                try:
                    source = done.result()
                except WorkspaceError:
                    raise
                except Exception:  # the row's own call raises it again as that row's result
                    continue
                for fmt, quantize, out, calibration in conversions_ahead(self.ctx, todo, fw, source):
                    lanes.prefetch(source, fmt, quantize, out, calibration)
                warm.extend(runtimes_ahead(self.ctx, todo, fw, source))
                pairing.append(pairing_ahead(self.ctx, todo, fw, source))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: the training processes end with this one
        # The rows' runtime workers start (and import their frameworks) while the conversions finish, not
        # while a source trains.
        warm_workers(warm)
        for ref_cls, *targets in filter(None, pairing):  # and each baseline's pairing worker
            warm_pairing(ref_cls, targets)
        t = time.perf_counter()
        lanes.drain()
        return time.perf_counter() - t  # what conversions cost beyond the training they overlapped

    def _peer_outliers(self, run_id: str, results: list[Result]) -> set[str]:
        """A random-weight run's quantized rows triaged `expected` whose route rounds far worse than the other routes
        in its mode (triage.peer_outliers) are upstream candidates: each gets its bug bundle and is stored again.
        Returns their keys (also rows measured before, in a resumed run: they are new sightings)."""
        changed = mark_peer_outliers(results, lambda r: self.ctx, run_id)
        for r in changed:
            stored.save(self.store, self.ctx.ws, r)
        return {r.combo_key for r in changed}

    def _interrupted(self, run_id: str) -> None:
        """Mark the run interrupted when the store still answers; a store that fails says so itself."""
        try:
            self.store.finish_run(run_id, "interrupted")
        except DeploytoolError:
            pass


class _Quiet(list):
    """The progress bar's surface, showing nothing (tqdm's import is a visible part of a quiet small run)."""

    def set_postfix_str(self, *_: Any, **__: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(todo: list[Combo], shown: bool) -> Any:
    if not shown:
        return _Quiet(todo)
    from tqdm import tqdm

    return tqdm(todo, desc="migrate", unit="combo", dynamic_ncols=True)


def prepare(req: MigrateRequest, ws: Workspace, progress: bool = False) -> tuple[RunContext, list[Combo], str, dict]:
    """Everything before the first combination runs: the context (with every target's preflight), the
    matrix, the run id and each row's key. Any user mistake surfaces here, before anything is measured."""
    ctx = RunContext.build(req, ws, targets=requested_targets(req), progress=progress)
    combos = plan_matrix(ctx, list(ctx.preflight))
    host_id = host_identity()
    run_id = run_id_for(ctx, host_id)
    keys = {c: ctx.combo_key(c, host_id) for c in combos}
    return ctx, combos, run_id, keys


def _warn(text: str) -> None:
    print(f"deploytool: warning: {text}", file=sys.stderr)


def migrate(req: MigrateRequest, workspace: str | Path | None = None, db_url: str | None = None,
            progress: bool = True, log: Callable[[str], None] = print,
            warn: Callable[[str], None] = _warn) -> RunOutcome:
    """`warn` gets each line of the pitfall check (the test set against its declared preprocessing)."""
    ws = Workspace.open(workspace)
    store = open_store(db_url, ws.default_db_url)
    # the runtimes' workers open from the start: a user's .keras is read for its signature in the worker its
    # baseline then runs in (deploytool.run.usermodel), so TensorFlow is imported once, not here and there
    with runtime_workers():
        ctx, combos, run_id, keys = prepare(req, ws, progress)
        if req.run_id:
            refuse_another_run_under_this_id(store, run_id, ctx)
        for line in ctx.dataset.warnings:
            warn(line)
        return _Run(ctx, store, log).run(combos, run_id, keys)


def departs_from_twin(result: Result, earlier: list[Result]) -> bool:
    """A backend's row (webgpu) that departs from its wasm twin on the same file, measured earlier in this run: a
    finding of the runtime even when its own verdict passes, so it gets a bug bundle like a failing row."""
    if result.artifact is None or result.combo.backend in ("", "wasm") or result.comparison is None:
        return False
    twins = [r for r in earlier if r.artifact is not None and r.artifact.sha256 == result.artifact.sha256
             and r.combo.target == result.combo.target and r.combo.backend == "wasm"]
    return any(result.combo.label in {e.label for e in p.entries if e.converter in p.departs}
               for p in backend_pairs([row_of(r) for r in (*twins, result)]))
