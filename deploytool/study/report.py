"""A study's report: report.html (self-contained, like a migration report), report.json and summary.md, built
from `Section`s a study module returns. A section is plain view data — text, tables of formatted cells, SVG
figures from deploytool.report.svg, and a JSON-able `data` dict for machines — so studies never write HTML.
"""

from __future__ import annotations

import json
import time
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploytool import __version__
from deploytool.provenance import host_facts
from deploytool.report import _write
from deploytool.report.html import _CSP, _environment, _script_hash, _static
from deploytool.report.text import _finite, _md
from deploytool.value import value

if TYPE_CHECKING:
    from deploytool.study.base import StudyRun


@value
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    caption: str = ""


@value
class Section:
    id: str  # an HTML anchor: letters, digits, '-'
    title: str
    text: str = ""  # one or two sentences: what the section shows and how to read it
    tables: tuple[Table, ...] = ()
    figures: tuple[str, ...] = ()  # SVG documents from deploytool.report.svg (trusted markup)
    data: dict[str, Any] = field(default_factory=dict)  # the numbers behind the section, for report.json


@value
class StudyReportPaths:
    html: Path
    json: Path
    markdown: Path


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _markdown(run: "StudyRun", sections: list[Section]) -> str:
    lines = [f"# {run.study} study: {run.model}", "", f"run `{run.run_id}`", ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.text:
            lines += [s.text, ""]
        for t in s.tables:
            if t.caption:
                lines += [f"*{_md(t.caption)}*", ""]
            lines.append("| " + " | ".join(_md(c) for c in t.columns) + " |")
            lines.append("|" + "---|" * len(t.columns))
            lines += ["| " + " | ".join(_md(_cell(v)) for v in row) + " |" for row in t.rows]
            lines.append("")
    lines.append("Full report with plots: report.html")
    return "\n".join(lines) + "\n"


def _json(run: "StudyRun", sections: list[Section], host: dict[str, Any]) -> dict[str, Any]:
    return _finite({"study": run.study, "run_id": run.run_id, "model": run.model, "request": run.request,
                    "host": host, "sections": [{"id": s.id, "title": s.title, "text": s.text, "data": s.data,
                                                "tables": [{"caption": t.caption, "columns": list(t.columns),
                                                            "rows": [list(r) for r in t.rows]} for t in s.tables]}
                                               for s in sections]})


def write_study_report(run: "StudyRun", sections: list[Section]) -> StudyReportPaths:
    """Write report.html, report.json and summary.md of a study run into its report folder."""
    from markupsafe import Markup

    t0 = time.perf_counter()
    out = run.report_dir
    out.mkdir(parents=True, exist_ok=True)
    paths = StudyReportPaths(out / "report.html", out / "report.json", out / "summary.md")
    host = host_facts()
    _write(paths.json, json.dumps(_json(run, sections, host), indent=1, allow_nan=False) + "\n")
    _write(paths.markdown, _markdown(run, sections))
    js = _static("report.js")
    views = [{"id": s.id, "title": s.title, "text": s.text, "figures": [Markup(f) for f in s.figures],
              "tables": [{"caption": t.caption, "columns": t.columns, "rows": [[_cell(v) for v in r] for r in t.rows]}
                         for t in s.tables]} for s in sections]
    html = _environment().get_template("study.html.j2").render(
        title=f"{run.study} study: {run.model}", csp=_CSP.format(script_hash=_script_hash(js)), css=_static("report.css"),
        js=js, run=run, request=sorted((k, json.dumps(v) if not isinstance(v, str) else v) for k, v in run.request.items()),
        host=host, versions=sorted((host.get("versions") or {}).items()), sections=views, version=__version__,
        elapsed_ms=(time.perf_counter() - t0) * 1000)
    _write(paths.html, html)
    return paths
