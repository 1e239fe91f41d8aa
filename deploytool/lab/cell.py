"""What a lab worker does with one cell: rebuild the run's context for the
cell's target (once per request and process: the trained model, baseline and
test set are cached by content in the shared workspace, so nothing is sent
again), run the combination, write its bug bundle, and hand the row back to the
driver, which stores it. Workers need no database credentials."""

from __future__ import annotations

import threading
from typing import Any

from deploytool.bugs.findings import settle_row
from deploytool.convert.isolated import IsolatedConverter
from deploytool.provenance import host_identity, host_name
from deploytool.result import Combo, LabPlace
from deploytool.run.context import RunContext
from deploytool.run.request import MigrateRequest
from deploytool.run.runner import run_combination
from deploytool.targets import get_target
from deploytool.workspace import Workspace, stable_hash

_CACHE: dict[str, Any] = {}
_LOCK = threading.Lock()


def cell_context(request: dict[str, Any], workspace: str, target: str, device: str) -> Any:
    """The run's context in this process (a worker's, or the driver's for a row's bug bundle), for the cell's own
    device only: the lab's other phones are elsewhere."""

    options = {**(request.get("target_options") or {})}
    options[target] = get_target(target).cell_options(dict(options.get(target) or {}), device)
    request = {**request, "target_options": options}
    key = stable_hash({"request": request, "workspace": workspace, "target": target})
    if key not in _CACHE:
        _CACHE[key] = RunContext.build(MigrateRequest.from_json(request), Workspace.open(workspace), targets=[target])
    return _CACHE[key]


def _converter(workspace: str, timeout_s: float) -> Any:
    from pathlib import Path

    key = f"converter:{workspace}"
    if key not in _CACHE:
        _CACHE[key] = IsolatedConverter(Path(workspace) / "logs" / "lab-convert.log", timeout_s)
    return _CACHE[key]


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """Run one cell; returns the Result as JSON, naming the host and worker that measured it."""

    with _LOCK:  # one cell at a time per worker process: the cores are the measurement's
        combo = Combo(**cell["combo"])
        ctx = cell_context(cell["request"], cell["workspace"], combo.target, combo.device)
        # the cell's identity too: cells that differ only in threads or repeat are different rows of the night
        key = stable_hash({"combo": ctx.combo_key(combo, host_identity()), "cell": cell["cell"]}, 16)
        # measured again tonight (`attempt`): this process's files beside the others', not over them
        files = f"{key}-again{int(cell['attempt'])}" if cell.get("attempt") else key
        r = run_combination(ctx, _converter(cell["workspace"], ctx.req.timeout_s), combo, cell["run_id"], files)
        r.combo_key = key
        if r.failing:
            settle_row(ctx, r, cell["run_id"])
        try:
            from distributed import get_worker

            worker = get_worker().name
        except (ImportError, ValueError):
            worker = ""
        r.lab = LabPlace(cell=cell["cell"], host=host_name(), worker=str(worker))
        r.environment = {**r.environment, "threads": ctx.req.threads, **ctx.identity(combo.target)}
        return r.to_json()
