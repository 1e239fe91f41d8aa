"""`atlas.html`: the grid of architecture x route read from the stored rows of each architecture's run, coloured by
verdict, each cell linking its run's report and its row's bug bundle, with latency and size, the per-converter
summary lines and the distinct findings the atlas' runs produced (with their triage). Written beside atlas.json."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from deploytool.atlas import grid
from deploytool.atlas.grid import AtlasEntry
from deploytool.report.html import _environment
from deploytool.result import Result
from deploytool.run import stored
from deploytool.store import ResultStore, open_store
from deploytool.workspace import Workspace


def atlas_dir(ws: Workspace, tier: str) -> Path:
    """Where a tier's atlas.json and atlas.html live: beside the run reports they link."""
    return ws.report_dir(f"atlas-{tier}")


def build_grid(ws: Workspace, store: ResultStore, tier: str,
               entries: list[AtlasEntry]) -> tuple[list[grid.GridRow], dict[tuple[str, str], str], list[Result]]:
    folder = atlas_dir(ws, tier)
    rows, converters, results = [], {}, []
    for e in entries:
        row = grid.GridRow(e.name, e.family, e.provider, (e.built or {}).get("params"),
                           grid.describe_build(e.built, e.error))
        if e.run_id:
            row.report = _rel(ws.report_dir(e.run_id) / "report.html", folder)
            mine = stored.stored_results(store, ws, e.run_id)
            for r in mine:
                route = grid.route_of(r)
                bundle = _rel(ws.absolute(r.bundle), folder) if r.bundle else ""
                row.cells[route] = grid.cell_of(r, row.report, bundle)
                converters[(e.name, route)] = grid.converter_of(r)
                results.append(r)
            sensitive = grid.rounding_sensitivity(mine)
            row.note = "; ".join(x for x in (row.note, sensitive) if x)
        rows.append(row)
    return rows, converters, results


def findings_of(store: ResultStore, run_ids: set[str]) -> list[Any]:
    """The distinct findings the atlas' runs were seen in, most occurrences first."""
    found = [f for f in store.findings() if run_ids & set(f.runs)]
    return sorted(found, key=lambda f: (-f.occurrences, f.title))


def write_page(ws: Workspace, db_url: str | None, tier: str, entries: list[AtlasEntry],
               seconds: float | None) -> Path:
    store = open_store(db_url, ws.default_db_url)
    rows, converters, _ = build_grid(ws, store, tier, entries)
    findings = findings_of(store, {e.run_id for e in entries if e.run_id})
    folder = atlas_dir(ws, tier)
    folder.mkdir(parents=True, exist_ok=True)
    html = _environment().get_template("atlas.html.j2").render(
        tier=tier, rows=rows, routes=grid.route_order(rows), counts=grid.counts(rows),
        expected=sum(c.triage == "expected" for row in rows for c in row.cells.values()),
        summaries=grid.summaries(rows, converters), outcomes=grid.OUTCOMES, seconds=seconds,
        findings=[{"id": f.id, "title": f.title, "klass": f.klass or "untriaged", "state": f.state,
                   "occurrences": f.occurrences, "link": _rel(ws.finding_dir(f.id), folder)} for f in findings])
    page = folder / "atlas.html"
    page.write_text(html, encoding="utf-8")
    return page


def _rel(path: Path, folder: Path) -> str:
    return Path(os.path.relpath(path, folder)).as_posix()
