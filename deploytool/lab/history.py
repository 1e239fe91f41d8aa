"""A lab's history over its last N nights, as the lab report shows it: for each
cell (the same cell on the same host) one point per night with its outcome,
accuracy, latency quartiles and memory, and links to that night's run report and
bug bundle. Numbers come from the store (and the per-sample latency files it
names); each night's judgement and links come from the lab.json written that
night. Nothing here judges or measures."""

from __future__ import annotations

import json
import os
from dataclasses import field
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.errors import first_line_of
from deploytool.report.numbers import num
from deploytool.result import Result
from deploytool.run import stored
from deploytool.store import ResultStore, RunRecord
from deploytool.value import value
from deploytool.workspace import Workspace

REPORT_NIGHTS = 14


@value
class Night:
    name: str
    run_id: str


@value(frozen=False)
class NightPoint:
    """One cell on one night."""

    outcome: str  # "regression", "failing", "suspicious", "unclear", "warn", "pass", or the status of a row not measured
    title: str  # the tooltip: what happened, in words
    accuracy: float | None = None
    p25_ms: float | None = None
    p50_ms: float | None = None
    p75_ms: float | None = None
    memory_bytes: float | None = None
    report: str | None = None  # relative to tonight's report folder
    bundle: str | None = None


@value(frozen=False)
class CellTrend:
    cell: str
    host: str
    label: str
    points: list[NightPoint | None] = field(default_factory=list)  # one per night, None: not run that night

    @property
    def tonight(self) -> NightPoint | None:
        return self.points[-1] if self.points else None


@value(frozen=False)
class LabHistory:
    nights: list[Night]  # oldest first, tonight last
    cells: list[CellTrend]  # regressions tonight first, then failing, then the rest by label


def lab_nights(store: ResultStore, lab_name: str) -> list[RunRecord]:
    """The stored nights of a lab, oldest first."""
    runs = [r for r in store.list_runs(limit=1000) if r.model == f"lab:{lab_name}"]
    return sorted(runs, key=lambda r: r.created_at)


def _night_rows(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """A night's judged rows (from its lab.json) by (cell, host); {} when that night wrote none."""
    try:
        doc = json.loads((folder / "lab.json").read_text())
    except (OSError, ValueError):
        return {}
    return {(r.get("cell", ""), r.get("host", "")): r for r in doc.get("cells") or []}


def _quartiles(r: Result) -> tuple[float | None, float | None]:
    """p25 and p75 of the stored per-sample latencies; (None, None) when the row kept none."""
    try:
        lat = np.load(r.latency_path) if r.latency_path else None
    except (OSError, ValueError):
        lat = None
    if lat is None or not len(lat):
        return None, None
    p25, p75 = np.percentile(lat, [25, 75])
    return float(p25), float(p75)


def _outcome(r: Result, row: dict[str, Any]) -> str:
    if row.get("alert"):
        return "regression"
    if r.failing:
        return "failing"
    if any(c.get("outcome") == "suspicious" for c in row.get("changes") or []):
        return "suspicious"
    if any(c.get("metric") == "latency" and c.get("outcome") == "unclear" for c in row.get("changes") or []):
        return "unclear"  # not judged (a busy machine, or the rank test undecided after measuring twice)
    return str(r.outcome)


def _link(night_dir: Path, rel: str | None, here: Path) -> str | None:
    if not rel or not (night_dir / rel).exists():
        return None
    return Path(os.path.relpath(night_dir / rel, here)).as_posix()


def _point(r: Result, row: dict[str, Any], night: Night, night_dir: Path, here: Path) -> NightPoint:
    m = r.metrics
    p25, p75 = _quartiles(r)
    outcome = _outcome(r, row)
    acc, p50 = num(m.get("accuracy")), num(m.get("p50_ms"))
    words = [f"night {night.name}: {outcome}"]
    words += [f"accuracy {100 * acc:.2f}%"] if acc is not None else []
    words += [f"p50 {p50:.4g} ms" + (f" (IQR {p25:.4g}..{p75:.4g})" if p25 is not None else "")] if p50 else []
    words += [f"{c['metric']} {c['outcome']}: {c['detail']}" for c in row.get("changes") or []]
    words += [first_line_of(r.reason, 200)] if r.failing and r.reason else []
    return NightPoint(outcome, "; ".join(words), acc, p25, p50, p75, num(m.get("memory_bytes")),
                      _link(night_dir, row.get("report"), here), _link(night_dir, row.get("bundle_link"), here))


def lab_history(lab_name: str, ws: Workspace, store: ResultStore, run_id: str, n: int = REPORT_NIGHTS) -> LabHistory:
    """The last `n` nights of a lab up to and including `run_id` (tonight), written after tonight's lab.json."""
    earlier = [r for r in lab_nights(store, lab_name) if r.run_id != run_id]
    tonight = store.get_run(run_id) or RunRecord(run_id)
    chosen = (earlier[-(n - 1):] if n > 1 else []) + [tonight]
    nights = [Night(str(r.request.get("night") or r.run_id), r.run_id) for r in chosen]
    here = ws.report_dir(run_id)
    cells: dict[tuple[str, str], CellTrend] = {}
    for i, night in enumerate(nights):
        folder = ws.report_dir(night.run_id)
        rows = _night_rows(folder)
        for r in stored.stored_results(store, ws, night.run_id):
            key = (r.lab.cell, r.lab.host)
            row = rows.get(key, {})
            label = row.get("label") or r.lab.label or r.combo.label
            trend = cells.setdefault(key, CellTrend(key[0], key[1], label, [None] * len(nights)))
            trend.label = label  # the newest night's words
            trend.points[i] = _point(r, row, night, folder, here)
    order = sorted(cells.values(), key=lambda c: (
        not (c.tonight and c.tonight.outcome == "regression"), not (c.tonight and c.tonight.outcome == "failing"),
        not any(p and p.outcome == "regression" for p in c.points), c.label, c.host))
    return LabHistory(nights, order)
