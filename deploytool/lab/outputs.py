"""The lab report of a night: lab.html (the nights x cells matrix over the last
N nights, regressions first; per-cell trend plots of accuracy, p50 with its IQR
band and memory; links to each night's run report and bug bundle), summary.md
for CI, junit.xml (one test case per cell; a regression or failure is a failure)
and lab.json. Also the run report of each of the night's requests (a model at a
thread count), beside lab.html. It only writes what the night judged."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from deploytool.errors import DeploytoolError, StageFailed, first_line_of
from deploytool.lab.history import lab_history
from deploytool.lab.labfile import Lab
from deploytool.report.html import _environment
from deploytool.report.lines import Series, line_chart
from deploytool.report.markdown import code, prose
from deploytool.report.svg import PALETTE
from deploytool.run import stored
from deploytool.run.context import RunContext
from deploytool.run.request import MigrateRequest
from deploytool.store import ResultStore
from deploytool.value import value
from deploytool.workspace import Workspace, stable_hash


@value(frozen=False)
class NightPaths:
    html: Path
    markdown: Path
    junit: Path
    json: Path


def _rows(out: Any, reports: dict[str, str], folder: Path) -> list[dict[str, Any]]:
    rows = []
    for j in out.judged:
        r = j.result
        bundle = Path(r.bundle) / "README.md" if r.bundle else None
        rows.append({"cell": r.lab.cell, "label": r.lab.label or r.combo.label,
                     "host": r.lab.host, "worker": r.lab.worker, "outcome": r.outcome,
                     "failing": r.failing, "alert": j.alert, "reason": first_line_of(r.reason),
                     "accuracy": r.metrics.get("accuracy"), "p50_ms": r.metrics.get("p50_ms"),
                     "previous_night": j.previous_night, "measured_again": j.measured_again, "bundle": r.bundle,
                     "bundle_link": bundle.relative_to(folder).as_posix() if bundle and bundle.is_relative_to(folder)
                     else None, "report": reports.get(r.lab.cell),
                     "changes": [asdict(c) for c in j.changes if c.outcome != "same"]})
    return rows


def night_markdown(lab: str, night: str, summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """summary.md for CI: the alerts and failing cells, then the cells whose latency was not judged. Names,
    hosts and reasons come from models, devices and converters: they are code spans or inert prose
    (deploytool.report.markdown), so a `<img onerror=...>` in a label or a `|` in a reason stays text."""
    md = [f"### deploytool lab {code(lab)}, night {prose(night)}: {summary['alerts']} alert(s), "
          f"{summary['failing']} failing of {summary['cells']} cells", ""]
    for r in rows:
        if r["alert"] or r["failing"]:
            what = "; ".join(f"{c['metric']} {c['outcome']}: {c['detail']}" for c in r["changes"]) or r["reason"]
            md.append(f"- {code(r['label'])} on {prose(r['host'])}: **{prose(r['outcome'])}** — {prose(what)}")
    unclear = [(r, c) for r in rows if not (r["alert"] or r["failing"]) for c in r["changes"]
               if c["metric"] == "latency" and c["outcome"] == "unclear"]
    if unclear:  # not an alert, and not silence either
        md += ["", f"{len(unclear)} cell(s) with latency not judged tonight:"]
        md += [f"- {code(r['label'])} on {prose(r['host'])}: latency unclear — {prose(c['detail'])}"
               for r, c in unclear]
    return "\n".join(md) + "\n"


def write_night(lab: Lab, out: Any, ws: Workspace, store: ResultStore, cells: list[Any],
                log: Callable[[str], None] = print) -> NightPaths:
    folder = ws.report_dir(out.run_id)
    folder.mkdir(parents=True, exist_ok=True)
    paths = NightPaths(folder / "lab.html", folder / "summary.md", folder / "junit.xml", folder / "lab.json")
    rows = _rows(out, write_run_reports(ws, store, out, cells, log), folder)
    summary = {"cells": len(rows), "alerts": sum(r["alert"] for r in rows), "failing": sum(r["failing"] for r in rows),
               "reused": out.reused, "seconds": round(out.seconds, 1)}
    doc = {"schema_version": 1, "lab": lab.name, "night": out.night, "run_id": out.run_id, "summary": summary,
           "cells": rows}
    paths.json.write_text(json.dumps(doc, indent=1, default=str, allow_nan=False))
    paths.markdown.write_text(night_markdown(lab.name, out.night, summary, rows))
    suite = ET.Element("testsuite", name=f"deploytool.lab.{lab.name}", tests=str(len(rows)))
    failures = 0
    for r in rows:
        case = ET.SubElement(suite, "testcase", classname=f"lab.{lab.name}.{r['host'] or 'host'}", name=r["label"])
        if r["alert"] or r["failing"]:
            failures += 1
            msg = "; ".join(f"{c['metric']} {c['outcome']}" for c in r["changes"]) or r["outcome"]
            ET.SubElement(case, "failure", message=msg[:500]).text = json.dumps(r["changes"], default=str)
    suite.set("failures", str(failures))
    paths.junit.write_text(ET.tostring(suite, encoding="unicode"))
    paths.html.write_text(_page(lab, out, ws, store, summary, rows))
    return paths


def write_run_reports(ws: Workspace, store: ResultStore, out: Any, cells: list[Any],
                      log: Callable[[str], None] = print) -> dict[str, str]:
    """The run report of each request of the night (a model at a thread count) in runs/<model>-<hash>/ of the
    night's folder; returns each cell's link to it, relative to that folder. A report that cannot be written
    is one line in the log and no link: it never costs the lab report."""

    folder = ws.report_dir(out.run_id)
    by_cell = {c.id: c for c in cells}
    groups: dict[str, list[Any]] = {}
    for j in out.judged:
        cell = by_cell.get(j.result.lab.cell)
        if cell is not None:
            groups.setdefault(stable_hash(cell.request, 8), []).append((cell, j.result))
    links = {}
    for key, members in groups.items():
        cell = members[0][0]
        sub = folder / "runs" / f"{Path(cell.model).stem}-{key}"
        try:
            req = MigrateRequest.from_json(cell.request)
            ctx = RunContext.build(req, ws, targets=sorted({c.combo.target for c, _ in members}), run=False)
            stored.write_report(ctx, store, out.run_id, [r for _, r in members], sub, measure_baselines=False)
        except (DeploytoolError, StageFailed, OSError) as e:
            log(f"night {out.night}: no run report for {cell.model} ({first_line_of(str(e), 200)})")
            continue
        bugs = sub / "bugs"  # the report links its bundles as bugs/<name>/: they are the night's
        if (folder / "bugs").is_dir() and not bugs.exists():
            bugs.symlink_to(Path("..", "..", "bugs"), target_is_directory=True)
        links.update({c.id: f"runs/{sub.name}/report.html" for c, _ in members})
    return links


def _page(lab: Lab, out: Any, ws: Workspace, store: ResultStore, summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    from markupsafe import Markup

    hist = lab_history(lab.name, ws, store, out.run_id, lab.report_nights)
    trends = [Markup(trend_svgs(c, hist.nights)) for c in hist.cells]
    return _environment().get_template("lab.html.j2").render(
        lab=lab.name, night=out.night, summary=summary, rows=rows, nights=hist.nights, cells=hist.cells,
        trends=trends)


def trend_svgs(cell: Any, nights: list[Any]) -> str:
    """A cell's accuracy, p50 (with its p25..p75 band) and memory over the nights, one point per night it ran."""

    names = [n.name for n in nights]

    def x_fmt(x: float) -> str:
        i = int(round(x)) - 1
        return names[i][-5:] if abs(x - round(x)) < 1e-9 and 0 <= i < len(names) else ""

    pts = [(i + 1, p) for i, p in enumerate(cell.points) if p is not None]
    xs = [x for x, _ in pts]
    nan = float("nan")
    acc = Series("accuracy %", xs, [100 * p.accuracy if p.accuracy is not None else nan for _, p in pts], PALETTE[2])
    p50 = Series("p50 ms (band: p25..p75)", xs, [p.p50_ms if p.p50_ms is not None else nan for _, p in pts],
                 PALETTE[0], band=([p.p25_ms if p.p25_ms is not None else nan for _, p in pts],
                                   [p.p75_ms if p.p75_ms is not None else nan for _, p in pts]))
    mem = Series("memory MB", xs, [p.memory_bytes / 1e6 if p.memory_bytes else nan for _, p in pts], PALETTE[5])
    return "".join(line_chart([s], title=f"{cell.label}: {s.label}", y_label=s.label, x_label="night", x_fmt=x_fmt,
                              x_log=False, y_log=False, width=330, height=200)
                   for s in (acc, p50, mem))


