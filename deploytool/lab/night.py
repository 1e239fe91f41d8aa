"""A lab night: plan the cells of a lab file, run them on Dask (each pinned to
the worker that owns its resource), store each result as it arrives, and judge
every cell against the last good night of the same cell (deploytool.lab.regress);
latency against the last good night timed under a comparable machine load, and
not at all (reported "unclear") when the load confounds it.
Running a night again with the same name resumes it: cells already final are
not measured twice."""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from deploytool.bugs.findings import mark_peer_outliers
from deploytool.bugs.upstream import fold_findings
from deploytool.errors import DeploytoolError, UnknownOption
from deploytool.lab import engine, regress
from deploytool.lab.cell import cell_context, run_cell
from deploytool.lab.history import lab_nights
from deploytool.lab.labfile import Lab, describe, with_built_architectures
from deploytool.lab.outputs import write_night
from deploytool.migrate import plan_matrix, requested_targets
from deploytool.provenance import host_name
from deploytool.result import Combo, LabPlace, Measurement, Result, Status
from deploytool.run import stored
from deploytool.run.context import RunContext
from deploytool.run.request import MigrateRequest
from deploytool.store import ResultStore, RunRecord
from deploytool.targets import get_target
from deploytool.value import value
from deploytool.workspace import Workspace, check_name, stable_hash

if TYPE_CHECKING:
    from deploytool.lab.regress import MachineLoad


@value(frozen=False)
class Cell:
    id: str  # the cell across nights: model, request and combination (not the host: the worker adds it)
    label: str
    request: dict[str, Any]
    combo: Combo
    resource: str
    model: str
    unavailable: str = ""  # why no worker can run it, known when planned (a selector no phone matches): not sent


@value(frozen=False)
class Judged:
    result: Result
    changes: list[Any] = field(default_factory=list)  # regress.Change
    previous_night: str = ""
    measured_again: bool = False  # tonight's row is the fastest of several processes (the first's latency changed)

    @property
    def alert(self) -> bool:
        return any(c.alert for c in self.changes)


@value(frozen=False)
class NightOutcome:
    night: str
    run_id: str
    judged: list[Judged]
    reused: int
    seconds: float
    paths: Any = None

    @property
    def alerts(self) -> list[Judged]:
        return [j for j in self.judged if j.alert]


def run_id_of(lab: Lab, night: str) -> str:
    return check_name(f"lab-{lab.name}-{night}", "night", 128)


def model_request(lab: Lab, m: Any, threads: int) -> Any:
    """The migrate request of one lab model at one thread count (its cells are that request's rows)."""

    return MigrateRequest(model=m.name, frameworks=m.frameworks, formats=lab.formats, quantize=lab.quantize,
                          targets=lab.targets, target_options={k: dict(v) for k, v in lab.target_options.items()},
                          runtimes=lab.runtimes, threads=threads, latency_samples=lab.latency_samples,
                          limit_test=lab.test_samples, tolerances=dict(lab.tolerances),
                          test_npz=Path(m.data) if m.data else None, scale=m.scale, mean=m.mean, std=m.std,
                          layout=m.layout, random_weights=m.random_weights)


def plan_cells(lab: Lab, ws: Workspace, resources: dict[str, dict[str, str]],
               worker_cpus: int | None = None) -> list[Cell]:
    """Every cell of the night. A plan larger than `[lab] max_cells` is refused before anything trains; a cell
    asking for more threads than the largest worker has CPUs (`worker_cpus`) is planned as unavailable."""
    first = _first_plans(lab, ws, resources)
    cells: list[Cell] = []
    for m in lab.models:
        for threads in lab.threads:
            req, ctx, combos = first[m] if threads == lab.threads[0] else _model_plan(lab, m, threads, ws, resources)
            request = req.to_json()
            for repeat in range(lab.repeats):
                for c in combos:
                    cell = stable_hash({"request": request, "combo": c.__dict__, "repeat": repeat}, 16)
                    res = get_target(c.target).resource(ctx.position(c))
                    label = f"{ctx.spec.name} {c.label}" + (f" x{threads}t" if len(lab.threads) > 1 else "") + \
                        (f" #{repeat + 1}" if lab.repeats > 1 else "")
                    why = ctx.preflight[c.target].unavailable.get(c.device, "")
                    if not why and worker_cpus and threads > worker_cpus and get_target(c.target).threads_on_worker:
                        why = f"asks for {threads} threads; no lab worker has more than {worker_cpus} CPUs"
                    cells.append(Cell(cell, label, request, c, res, ctx.spec.name, why))
    return cells


def _first_plans(lab: Lab, ws: Workspace,
                 resources: dict[str, dict[str, str]]) -> dict[Any, tuple[Any, RunContext, list[Combo]]]:
    """Each model's plan at the first thread count, after refusing a night of more than `[lab] max_cells` cells.
    Run once before the cluster starts with no resources but the host's (a lower bound: a phone no worker owns
    adds no cell), so a runaway plan is one line without a cluster to start and stop; then with the cluster's."""
    first = {m: _model_plan(lab, m, lab.threads[0], ws, resources) for m in lab.models}
    total = sum(len(combos) for _, _, combos in first.values()) * len(lab.threads) * lab.repeats
    if total > lab.max_cells:
        raise UnknownOption(f"{lab.path}: the night plans {total} cells ({len(lab.models)} model(s) x "
                            f"{len(lab.threads)} thread count(s) x {lab.repeats} repeat(s) x the matrix), more than "
                            f"[lab] max_cells = {lab.max_cells}; narrow [matrix] or raise max_cells")
    return first


def _model_plan(lab: Lab, m: Any, threads: int, ws: Workspace,
                resources: dict[str, dict[str, str]]) -> tuple[Any, RunContext, list[Combo]]:
    """One lab model at one thread count: its request, the context of a stored run (nothing trains) and the
    combinations of its matrix."""
    req = model_request(lab, m, threads)
    targets = requested_targets(req)
    ctx = RunContext.build(req, ws, targets=targets, run=False)
    for t in targets:
        ctx.preflight[t] = get_target(t).lab_preflight(ctx.target_options[t], resources)
    return req, ctx, plan_matrix(ctx, targets)


def _lost(cell: Cell, run_id: str, status: Status, reason: str) -> Result:
    return Result(run_id=run_id, combo_key=stable_hash({"cell": cell.id, "status": str(status)}, 16), model=cell.model,
                  dataset="", combo=cell.combo, status=status, reason=reason, lab=LabPlace(cell=cell.id))


def run_night(lab: Lab, ws: Workspace, store: ResultStore, night: str | None = None, scheduler: str | None = None,
              progress: bool = True, log: Callable[[str], None] = print,
              no_worker_timeout_s: float | None = None) -> NightOutcome:
    from distributed import as_completed

    night = night or dt.date.today().isoformat()
    run_id = run_id_of(lab, night)
    lab = with_built_architectures(lab, ws, log)  # atlas architectures: their model files and test sets
    t0 = time.perf_counter()
    timeout = engine.NO_WORKER_TIMEOUT_S if no_worker_timeout_s is None else no_worker_timeout_s
    _first_plans(lab, ws, {"host": {}})  # a runaway plan refused before a cluster starts (and must stop)
    with engine.client(scheduler, None if scheduler else engine.local_resources(lab.browsers_per_host), timeout) as c:
        cells = plan_cells(lab, ws, {"host": {}, **engine.cluster_resources(c)}, engine.cluster_cpus(c))
        done = {r.lab.cell for r in store.results_for(run_id) if r.status.final}
        todo = [cell for cell in cells if cell.id not in done]
        before = store.get_run(run_id)  # a night that completed before had its rows folded into the findings then
        folded_before = before is not None and before.run_id == run_id and before.status == "complete"
        try:  # from the moment the night is recorded, an interruption marks it so
            store.start_run(run_id, f"lab:{lab.name}", {"kind": "lab", "lab": describe(lab), "night": night,
                                                          "cells": len(cells)})
            if len(cells) - len(todo):
                log(f"night {night}: {len(cells) - len(todo)} of {len(cells)} cells already measured; "
                    f"running the other {len(todo)}")
            _run_cells(c, todo, ws, store, run_id, as_completed, progress)
            judged = judge_night(lab, ws, store, run_id, cells)
            judged = _measure_again_until_sure(lab, ws, store, run_id, cells, judged,
                                               lambda again, attempt: _run_cells(c, again, ws, store, run_id,
                                                                                 as_completed, progress, attempt),
                                               log, night)
            now = {cell.id for cell in todo}  # only rows measured now are new sightings of a night folded before
            _fold_findings(ws, store, run_id, cells, judged, lambda j: not folded_before or j.measured_again or (
                j.result.lab is not None and j.result.lab.cell in now), log)
        except (KeyboardInterrupt, DeploytoolError):
            _interrupted(store, run_id)
            raise
        store.finish_run(run_id)
    out = NightOutcome(night, run_id, judged, len(cells) - len(todo), time.perf_counter() - t0)

    out.paths = write_night(lab, out, ws, store, cells, log)
    return out


def _fold_findings(ws: Workspace, store: ResultStore, run_id: str, cells: list[Cell], judged: list[Judged],
                   new: Callable[[Judged], bool], log: Callable[[str], None]) -> None:
    """What a migrate does once its rows are measured, for the night's: a random-weight model's quantized route far
    off its peers becomes an upstream candidate with its bug bundle (its cells ran apart; only here are its peers
    side by side), then the rows `new` says are new sightings, and those just made candidates, fold into the
    store's findings (each upstream candidate confirmed by its bare reproducer)."""
    by_id = {c.id: c for c in cells}

    def cell_of(r: Result) -> Cell | None:
        return by_id.get(r.lab.cell) if r.lab is not None else None

    def context_of(r: Result) -> Any:
        c = cell_of(r)
        return None if c is None else cell_context(c.request, str(ws.root), c.combo.target, c.combo.device)

    random = [j.result for j in judged if (c := cell_of(j.result)) is not None and c.request.get("random_weights")]
    marked = mark_peer_outliers(random, context_of, run_id)
    for r in marked:
        stored.save(store, ws, r)
    made = {id(r) for r in marked}
    fold_findings(store, ws, run_id, [j.result for j in judged if new(j) or id(j.result) in made], log, "tonight")


def _run_cells(c: Any, cells: list[Cell], ws: Workspace, store: ResultStore, run_id: str, as_completed: Any,
               progress: bool, attempt: int = 0) -> list[Result]:
    """Run `cells` on the cluster, storing each row as it arrives; returns the rows. `attempt` > 0: the cells'
    measurement number `attempt` + 1 tonight, in a new process (its files beside the first's, not over them)."""
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker, NoValidWorkerError
    from tqdm import tqdm

    futures = {}
    rows: list[Result] = []
    for cell in cells:
        if cell.unavailable:
            rows.append(_lost(cell, run_id, Status.NO_WORKER, cell.unavailable))
            stored.save(store, ws, rows[-1])
            continue
        payload = {"cell": cell.id, "request": cell.request, "combo": cell.combo.__dict__, "run_id": run_id,
                   "workspace": str(ws.root), "attempt": attempt}
        f = c.submit(run_cell, payload, resources={cell.resource: 1}, retries=1, pure=False,
                     key=f"cell-{run_id}-{cell.id}" + (f"-again{attempt}" if attempt else ""))
        futures[f] = cell
    bar = tqdm(total=len(futures), desc="night", unit="cell", disable=not progress, dynamic_ncols=True)
    try:
        for f in as_completed(futures):
            cell = futures[f]
            try:
                r = Result.from_json(f.result())
            except KilledWorker as e:
                r = _lost(cell, run_id, Status.WORKER_LOST, f"the worker running it died twice ({e})")
            except NoValidWorkerError:
                r = _lost(cell, run_id, Status.NO_WORKER, f"no lab worker has the resource {cell.resource!r}")
            except FutureCancelledError as e:
                r = _lost(cell, run_id, Status.WORKER_LOST, f"cancelled: {e}")
            stored.save(store, ws, r)  # as it arrives: an interrupted night keeps what was measured
            rows.append(r)
            bar.update(1)
            bar.set_postfix_str(cell.label[:60])
    finally:
        bar.close()
    return rows


def _measure_again(j: Judged) -> bool:
    return any(c.metric == "latency" and c.outcome in ("unclear", "regression") for c in j.changes)


def _measure_again_until_sure(lab: Lab, ws: Workspace, store: ResultStore, run_id: str, cells: list[Cell],
                              judged: list[Judged], run: Callable[[list[Cell], int], list[Result]],
                              log: Callable[[str], None], night: str) -> list[Judged]:
    """A latency change may be the process, not the model: a cell whose latency is unclear or worse is measured
    again in a new process, up to `[regression] latency_measure_again` times while it stays so. Tonight's row of
    such a cell is the fastest of its processes (another process only ever adds time: onnxruntime's LeNet-5 reads
    +25% in about one process in four beside the PC baseline, and two such processes in a row happen), and the
    spread of those processes is the host's process-to-process spread when the cell has too few earlier nights
    to tell it. A runtime that is really slower is slower in every process, and still alerts."""
    processes: dict[tuple[str, str], list[Result]] = {}
    measured_again: set[Any] = set()
    for attempt in range(1, lab.regression.latency_measure_again + 1):
        ids = {j.result.lab.cell for j in judged if _measure_again(j)}
        again = [cell for cell in cells if cell.id in ids]
        if not again:
            break
        for j in judged:
            if j.result.lab.cell in ids:
                processes.setdefault(_key(j.result), [j.result])
        log(f"night {night}: measuring {len(again)} cell(s) again in a new process ({attempt} of at most "
            f"{lab.regression.latency_measure_again}) to confirm a latency change")
        for r in run(again, attempt):
            processes.setdefault(_key(r), []).append(r)
        measured_again |= ids
        others = {}
        for key, rows in processes.items():
            best = _fastest(rows)
            if key[0] in ids:  # tonight's row of a cell measured again just now (a resumed night re-judges it)
                stored.save(store, ws, best)
            others[key] = [r.measurement for r in rows if r.measurement is not None and r is not best]
        judged = _after_measuring_again(judge_night(lab, ws, store, run_id, cells, other_processes=others),
                                        measured_again)
    return judged


def _fastest(rows: list[Result]) -> Result:
    """A cell's row tonight among its processes: the measured one with the lowest paired ratio to the PC baseline
    (else, timed alone, the lowest p50); the last when none was measured."""
    measured = [(p.ratio if (p := _paired(r)) is not None else r.measurement.p50_ms, i, r)
                for i, r in enumerate(rows) if r.measurement is not None and r.comparison is not None]
    return min(measured)[2] if measured else rows[-1]


def _after_measuring_again(judged: list[Judged], again: set[Any]) -> list[Judged]:
    """Say so where tonight's row was measured more than once; a latency still unclear stays unclear."""
    for j in judged:
        if j.result.lab.cell in again:
            j.measured_again = True
            j.changes = [replace(c, detail=f"{c.detail} (measured again tonight)")
                         if c.metric == "latency" and c.outcome == "unclear" else c for c in j.changes]
    return judged


def _interrupted(store: ResultStore, run_id: str) -> None:
    try:
        store.finish_run(run_id, "interrupted")
    except DeploytoolError:
        pass


# ------------------------------------------------------------------ judging against earlier nights
def _previous_nights(store: ResultStore, lab: Lab, run_id: str) -> list[RunRecord]:
    return [r for r in lab_nights(store, lab.name) if r.run_id != run_id]


def _by_cell(results: list[Result]) -> dict[tuple[str, str], Result]:
    """A night's results by (cell, host): the same cell measured on another host is another series."""
    return {(r.lab.cell, r.lab.host): r for r in results}


def _key(r: Result) -> tuple[str, str]:
    return r.lab.cell, r.lab.host


def _paired(r: Result) -> Any:
    """The row's paired latency (deploytool.latency.PairedLatency), None for a row timed alone."""
    p = r.measurement.paired if r.measurement is not None else None
    return p if p is not None and np.isfinite(p.ratio) and p.ratio > 0 else None


def row_load(r: Result) -> MachineLoad | None:
    """The load a row's latency was timed under (regress.MachineLoad), None when it recorded none. A row from
    before rows named their CPU count takes this machine's, when this machine measured it."""

    here = os.cpu_count() if r.lab.host == host_name() else None
    return regress.MachineLoad.of(r.environment, here)


def latency_reference(good: list[tuple[str, Result]], now: Result, difference_cpus: float) -> tuple[str, Result]:
    """The night tonight's latency is compared with: the last good night timed under a load comparable to
    tonight's; when none was (tonight is busy), the last good night timed on a quiet machine; else the last good
    night. `good` is oldest first and not empty."""

    load = row_load(now)
    if load is None:
        return good[-1]
    for night, h in reversed(good):
        other = row_load(h)
        if other is not None and not regress.load_confounds(other, load, difference_cpus):
            return night, h
    quiet = [(n, h) for n, h in good if (hl := row_load(h)) is not None and hl.quiet]
    return quiet[-1] if quiet else good[-1]


def _on_the_trend(r: Result) -> bool:
    """A night's median joins the cell's nightly trend unless it was timed on a machine that was not quiet."""
    load = row_load(r)
    return load is None or load.quiet


def judge_night(lab: Lab, ws: Workspace, store: ResultStore, run_id: str, cells: list[Cell],
                load_aware: bool = True,
                other_processes: dict[tuple[str, str], list[Measurement]] | None = None) -> list[Judged]:
    """Each of tonight's rows against its cell's earlier nights. `load_aware=False` judges latency as if no row
    had recorded its machine's load (the lab before it did; the noise benchmark's "before"). `other_processes`:
    tonight's other measurements of each cell measured again (other processes: with tonight's row, the host's
    process-to-process spread when the cell has too few earlier nights to tell it)."""

    reg = lab.regression
    tonight = stored.stored_results(store, ws, run_id)
    earlier = [(n.run_id, _by_cell(stored.stored_results(store, ws, n.run_id)))
               for n in _previous_nights(store, lab, run_id)]
    labels = {c.id: c.label for c in cells}
    truth: dict[str, np.ndarray | None] = {}
    judged = []
    for r in tonight:
        key = (r.lab.cell, r.lab.host)
        history = [(night, by[key]) for night, by in earlier if key in by]
        j = Judged(r)
        if history:
            last = history[-1][1]
            j.changes.append(regress.status_change(last.failing, r.failing, str(r.outcome)))
            good = [(n, h) for n, h in history if not h.failing and h.comparison is not None]
            on_trend = not load_aware or _on_the_trend(r)
            # a paired row's series is its ratio to the PC baseline (the drift of the machine cancelled); a row timed
            # alone, its p50. Rows of the other kind (stored before rows were paired) stay out of it.
            now_paired = _paired(r)
            series = [(_paired(h).ratio if now_paired is not None else h.measurement.p50_ms) for _, h in good
                      if h.measurement is not None and (now_paired is None) == (_paired(h) is None)
                      and (not load_aware or _on_the_trend(h))]
            others = (other_processes or {}).get(key, [])
            if good and r.comparison is not None:  # measured, even when its verdict now fails
                night, prev = good[-1]
                j.previous_night = night
                y = truth[r.model] if r.model in truth else truth.setdefault(r.model, _labels_of(lab, ws, r.model))
                ref = latency_reference(good, r, reg.load_difference_cpus) if load_aware else good[-1]
                j.changes += _compare(prev, r, y, reg, regress, ref, load_aware,
                                      series if load_aware and on_trend else [], others)
            if r.measurement is not None and series and on_trend:
                value = now_paired.ratio if now_paired is not None else r.measurement.p50_ms
                j.changes.append(regress.trend(series + [value], min_relative=reg.latency_min_relative))
        r.lab.label = r.lab.label or labels.get(key[0], r.combo.label)
        judged.append(j)
    return sorted(judged, key=lambda j: (not j.alert, not j.result.failing, j.result.lab.label))


def _labels_of(lab: Lab, ws: Workspace, model: str) -> np.ndarray | None:
    """The labels of the test set a lab model's cells ran on (the lab's data and --test-samples), for per-sample
    correctness (the outputs files hold the predictions)."""

    for m in lab.models:
        try:
            ctx = RunContext.build(model_request(lab, m, lab.threads[0]), ws, targets=[], run=False)
        except DeploytoolError:
            continue
        if ctx.spec.name == model:
            return ctx.dataset.y_test
    return None


def _compare(prev: Result, now: Result, y: np.ndarray | None, reg: Any, regress: Any,
             latency_ref: tuple[str, Result], load_aware: bool, nightly: Sequence[float] = (),
             others: Sequence[Measurement] = ()) -> list[Any]:
    """Tonight against the last good night `prev`; latency against `latency_ref` (a night and its row), under
    both rows' loads, and against `nightly` (the medians, or paired ratios, of earlier nights on the trend: a move
    within their spread is the cell's usual night-to-night noise, not a change). Two paired rows are judged on
    their ratios to the PC baseline, against the host's process-to-process spread (earlier nights', else
    tonight's processes' when `others` holds the cell's other measurements tonight). Accuracy, memory, size: never by
    load."""
    out = []
    try:
        if y is not None and prev.outputs_path and now.outputs_path:
            a, b = np.load(prev.outputs_path), np.load(now.outputs_path)
            if len(a) == len(b) == len(y):
                out.append(regress.accuracy_change(a.argmax(1) == y, b.argmax(1) == y, reg.min_accuracy_drop_points))
        ref_night, ref = latency_ref
        if _paired(ref) is not None and _paired(now) is not None:
            loads = (row_load(ref), row_load(now)) if load_aware else (None, None)
            logs = [float(np.log(v)) for v in nightly]
            if len(logs) >= regress.NOISE_MIN_NIGHTS:  # the cell's earlier nights
                spread, processes = regress.process_spread(logs), len(logs)
            else:  # tonight's processes, once the cell was measured again (else not known)
                logs = [float(np.log(p.ratio)) for m in others if (p := m.paired) is not None and p.ratio > 0]
                spread = regress.tonights_spread([*logs, float(np.log(_paired(now).ratio))]) if logs else None
                processes = len(logs) + 1
            c = regress.paired_latency_change(_paired(ref), _paired(now), reg.latency_min_relative, spread,
                                              processes=processes)
            why = regress.load_confounds(loads[0], loads[1], reg.load_difference_cpus) if c.outcome != "same" else ""
            if why:
                c = replace(c, outcome="unclear", detail=f"{why}; {c.detail.removesuffix('; measure again')}; "
                                                          "not judged")
            if c.outcome == "regression" and spread is None:
                c = replace(c, outcome="unclear", detail=f"{c.detail}; the host's process-to-process spread is not "
                                                          "known yet: measure again in a new process")
            if ref is not prev:
                c = replace(c, detail=f"{c.detail}; against {ref_night} (load {loads[0]}), not the last good "
                                      "night: its load was not comparable")
            out.append(c)
        elif ref.latency_path and now.latency_path:
            loads = (row_load(ref), row_load(now)) if load_aware else (None, None)
            c = regress.latency_change(np.load(ref.latency_path), np.load(now.latency_path), reg.latency_min_relative,
                                       reg.latency_k_iqr, load_before=loads[0], load_now=loads[1],
                                       load_difference_cpus=reg.load_difference_cpus)
            if ref is not prev:
                c = replace(c, detail=f"{c.detail}; against {ref_night} (load {loads[0]}), not the last good "
                                      "night: its load was not comparable")
            if c.outcome in ("regression", "improvement") and now.measurement is not None:
                noise = regress.within_nightly_noise(list(nightly), now.measurement.p50_ms)
                if noise:
                    c = replace(c, outcome="same", detail=f"{c.detail}; not judged a change: {noise}")
                elif c.outcome == "regression" and load_aware and len(nightly) < regress.NOISE_MIN_NIGHTS:
                    c = regress.beyond_tonights_processes(c, [m.p50_ms for m in others],
                                                          now.measurement.p50_ms)
            out.append(c)
    except (OSError, ValueError) as e:
        out.append(regress.Change("files", "unclear", f"cannot read an earlier night's files ({e})"))
    out += _memory_change(prev, now, latency_ref, reg, load_aware)
    out.append(regress.threshold_change("size", prev.metrics.get("size_bytes"), now.metrics.get("size_bytes"),
                                        reg.size_max_relative))
    return out


# Memory figures that are a garbage-collected heap's peak: how high it climbs depends on when the collector runs,
# and a collector that gets less CPU runs later (examples/lab.toml with one busy loop per CPU: onnxruntime-web rows'
# renderer peak +11% and +12% on identical nights). Such a figure is judged as latency is: against the last good
# night timed under a comparable load, and not at all when the load confounds it.
GC_PEAKS = frozenset({"renderer_peak_rss_bytes"})


def _memory_change(prev: Result, now: Result, latency_ref: tuple[str, Result], reg: Any,
                   load_aware: bool) -> list[Any]:
    if not (_process_figure(prev) and _process_figure(now)):
        return []
    gc_peak = load_aware and now.measurement is not None and (now.measurement.memory or ("",))[0] in GC_PEAKS
    ref_night, ref = latency_ref if gc_peak and _process_figure(latency_ref[1]) else ("", prev)
    c = regress.threshold_change("memory", ref.metrics.get("memory_bytes"), now.metrics.get("memory_bytes"),
                                 reg.memory_max_relative)
    why = regress.load_confounds(row_load(ref), row_load(now), reg.load_difference_cpus) if gc_peak else ""
    if why and c.outcome != "same":
        c = replace(c, outcome="unclear", detail=f"{why}; {c.detail}; a garbage-collected heap's peak: not judged")
    if ref is not prev:
        c = replace(c, detail=f"{c.detail}; against {ref_night}, not the last good night: its load was not "
                              "comparable")
    return [c]


def _process_figure(r: Result) -> bool:
    """Memory is compared only where the figure repeats: a whole process's (browser renderer, phone) or a host
    runtime's measured in its own process; the older in-process RSS delta depended on what was imported before
    it (issue 10) and would raise false alarms."""
    m = r.measurement.memory if r.measurement is not None else None
    return m is not None and (m[0] == "isolated_peak_rss_delta_bytes" or "delta" not in m[0])


def require_lab_run(run: RunRecord | None, name: str) -> RunRecord:
    if run is None:
        raise UnknownOption(f"no stored night {name!r}; `deploytool lab history` lists them")
    return run
