"""A run's side effects and its stored form: rows to and from the store (with
workspace files by relative path), the report of a run, and the `RunContext`
of a stored run for `report` and `localize`. Nothing here measures."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from deploytool import report
from deploytool.provenance import host_facts
from deploytool.result import Result
from deploytool.run.context import RunContext
from deploytool.run.request import MigrateRequest
from deploytool.store import ResultStore, RunRecord
from deploytool.targets import expand, selectable
from deploytool.workspace import Workspace

_FILES = ("outputs_path", "latency_path", "bundle")


def for_store(ws: Workspace, result: Result) -> Result:
    """The row as the store keeps it: workspace files by their workspace-relative path, so it means the
    same from any directory and names nothing on this host's disk."""
    paths: dict[str, Any] = {k: ws.relative(Path(getattr(result, k))) for k in _FILES if getattr(result, k)}
    return replace(result, **paths)


def stored_results(store: ResultStore, ws: Workspace, run_id: str) -> list[Result]:
    """A run's rows from the store, with workspace files resolved to absolute paths."""
    def resolved(r: Result) -> Result:
        paths: dict[str, Any] = {k: str(ws.absolute(getattr(r, k))) for k in _FILES if getattr(r, k)}
        return replace(r, **paths)

    return [resolved(r) for r in store.results_for(run_id)]


def save(store: ResultStore, ws: Workspace, result: Result) -> None:
    store.save(for_store(ws, result))


def write_report(ctx: RunContext, store: ResultStore, run_id: str, results: list[Result], out_dir: Path | None = None,
                 measure_baselines: bool = True) -> Any:
    """The run report of `results` into `out_dir` (default: the run's report folder). `measure_baselines=False`
    (the lab's driver, which measures nothing): only the baselines `ctx` already has; each row's comparison still
    carries its baseline's accuracy."""

    for fw in {r.combo.framework for r in results} if measure_baselines else ():
        try:
            ctx.source(fw)  # cached: the baseline is needed for the report even on a resumed run
        except Exception:
            if fw not in ctx.failed_sources:
                raise  # a baseline that crashed in deploytool's own code: its rows say so; the report goes on
    history = store.history(ctx.spec.name, [r.combo_key for r in results], run_id)
    images = ctx.dataset.images(ctx.dataset.x_test)  # None: the gallery shows a sample's values, not a picture
    inp = report.ReportInput(
        run_id=run_id, model=ctx.spec.name, dataset=ctx.dataset.name,
        run_info={**ctx.req.to_json(), "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  "host": host_facts(), "dataset_sha256": ctx.dataset.sha256, "dataset_origin": ctx.dataset.origin,
                  "data_warnings": list(ctx.dataset.warnings)},
        results=results, baselines={fw: asdict(s.baseline) for fw, s in ctx.sources.items()},
        labels=list(ctx.spec.labels), y_true=ctx.dataset.y_test,
        images=images, history=history, inputs=ctx.dataset.x_test if images is None else None)
    return report.write_report(inp, out_dir or ctx.ws.report_dir(run_id))


def context_for_stored_run(run: RunRecord, ws: Workspace) -> RunContext:
    """The RunContext of a stored run, rebuilt from its recorded request; no browser or device is looked for."""
    recorded = run.request
    req = MigrateRequest.from_json(recorded)
    identity = dict(recorded.get("identity") or {})
    if "browser_build" in recorded and recorded["browser_build"]:  # recorded before targets had identities
        identity.setdefault("web", {"browser": recorded["browser_build"]})
    targets = [t for t in recorded.get("planned_targets") or _named_targets(req)]
    return RunContext.build(req, ws, targets=targets, run=False, stored_identity=identity)


def _named_targets(req: MigrateRequest) -> list[str]:
    return expand(req.targets, selectable(), "target")


def rebuild_report(run: RunRecord, store: ResultStore, ws: Workspace) -> tuple[Any, list[Result]]:
    """Write the report of a stored migrate run again, from the database and the workspace."""
    ctx = context_for_stored_run(run, ws)
    results = stored_results(store, ws, run.run_id)
    return write_report(ctx, store, run.run_id, results), results
