"""The lab report of a night: lab.html (cells, regressions first, each with what
changed against the last good night, the trend across nights, and links to the
run report and bug bundle), summary.md for CI, junit.xml (one test case per
cell; a regression or failure is a failure) and lab.json."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deploytool.lab.labfile import Lab


@dataclass
class NightPaths:
    html: Path
    markdown: Path
    junit: Path
    json: Path


def _rows(out: Any) -> list[dict[str, Any]]:
    rows = []
    for j in out.judged:
        r = j.result
        env = r.environment
        rows.append({"cell": env.get("lab_cell", ""), "label": env.get("lab_label", r.combo.label),
                     "host": env.get("lab_host", ""), "worker": env.get("lab_worker", ""), "outcome": r.outcome,
                     "failing": r.failing, "alert": j.alert, "reason": r.reason.splitlines()[0][:300] if r.reason else "",
                     "accuracy": r.metrics.get("accuracy"), "p50_ms": r.metrics.get("p50_ms"),
                     "previous_night": j.previous_night, "bundle": r.bundle,
                     "changes": [asdict(c) for c in j.changes if c.outcome != "same"]})
    return rows


def write_night(lab: Lab, out: Any, folder: Path) -> NightPaths:
    from jinja2 import Environment

    folder.mkdir(parents=True, exist_ok=True)
    paths = NightPaths(folder / "lab.html", folder / "summary.md", folder / "junit.xml", folder / "lab.json")
    rows = _rows(out)
    summary = {"cells": len(rows), "alerts": sum(r["alert"] for r in rows), "failing": sum(r["failing"] for r in rows),
               "reused": out.reused, "seconds": round(out.seconds, 1)}
    doc = {"schema_version": 1, "lab": lab.name, "night": out.night, "run_id": out.run_id, "summary": summary,
           "cells": rows}
    paths.json.write_text(json.dumps(doc, indent=1, default=str, allow_nan=False))
    md = [f"### deploytool lab `{lab.name}`, night {out.night}: {summary['alerts']} alert(s), "
          f"{summary['failing']} failing of {summary['cells']} cells", ""]
    for r in rows:
        if r["alert"] or r["failing"]:
            what = "; ".join(f"{c['metric']} {c['outcome']}: {c['detail']}" for c in r["changes"]) or r["reason"]
            md.append(f"- `{r['label']}` on {r['host']}: **{r['outcome']}** — {what}")
    paths.markdown.write_text("\n".join(md) + "\n")
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
    env = Environment(autoescape=True)
    page = env.from_string(_PAGE).render(lab=lab.name, night=out.night, summary=summary, rows=rows)
    paths.html.write_text(page)
    return paths


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>lab {{ lab }} — {{ night }}</title>
<style>body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}td,th{border:1px solid #ccc;
padding:3px 8px;text-align:left}tr.alert{background:#f3a9a9}tr.failing{background:#ffe1a6}.muted{color:#666}</style>
</head><body><h1>Lab {{ lab }}, night {{ night }}</h1>
<p>{{ summary.cells }} cells, <b>{{ summary.alerts }} alert(s)</b>, {{ summary.failing }} failing,
{{ summary.reused }} reused from an earlier attempt, {{ summary.seconds }} s.</p>
<table><thead><tr><th>cell</th><th>host / worker</th><th>result</th><th>accuracy</th><th>p50 ms</th>
<th>against the last good night</th><th>bundle</th></tr></thead><tbody>
{% for r in rows %}<tr class="{{ 'alert' if r.alert else 'failing' if r.failing else '' }}">
<td>{{ r.label }}</td><td>{{ r.host }} <span class="muted">{{ r.worker }}</span></td><td>{{ r.outcome }}
{% if r.reason %}<div class="muted">{{ r.reason }}</div>{% endif %}</td>
<td>{{ '%.2f%%'|format(100 * r.accuracy) if r.accuracy is not none else 'n/a' }}</td>
<td>{{ '%.4g'|format(r.p50_ms) if r.p50_ms is not none else 'n/a' }}</td>
<td>{% for c in r.changes %}<div><b>{{ c.metric }}</b> {{ c.outcome }}: {{ c.detail }}</div>{% endfor %}
{% if r.previous_night %}<div class="muted">vs {{ r.previous_night }}</div>{% endif %}</td>
<td>{% if r.bundle %}<a href="bugs/{{ r.bundle.split('/')[-1] }}/README.md">reproducer</a>{% endif %}</td></tr>
{% endfor %}</tbody></table></body></html>"""
