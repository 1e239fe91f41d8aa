"""The report of one run: a self-contained HTML page (summary table, plots,
confusion difference, flipped-sample gallery, provenance), a JSON document
with a versioned schema, a Markdown summary for CI comments and JUnit XML.
Everything is built from stored `Result`s and baselines, read once into
typed `ReportRow`s (rows.py) that every writer reads; the report never
runs a model, recomputes a comparison or changes a verdict. It must stay fast
(well under a second for a full matrix): it reads only the latency sample files
and never the per-sample output arrays, since the flip lists already say which
samples changed.
"""

from __future__ import annotations

import os
import time
from dataclasses import field
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.report import html as _html
from deploytool.report import text as _text
from deploytool.report.rows import ReportRow, summary_rows
from deploytool.result import Result
from deploytool.value import value

__all__ = ["ReportInput", "ReportPaths", "ReportRow", "write_report", "summary_rows"]


@value(frozen=False)
class ReportInput:
    run_id: str
    model: str
    dataset: str
    run_info: dict[str, Any]  # request, created_at, host, versions, ...
    results: list[Result]
    baselines: dict[str, dict[str, Any]]  # framework -> asdict(Baseline)
    labels: list[str]  # class names
    y_true: np.ndarray  # (N,) int
    images: Any  # (N, H, W, C) float in [0, 1] for the gallery; None when the samples are not pictures
    history: dict[str, Result] = field(default_factory=dict)  # combo_key -> earlier measured result
    # the test inputs of a model with a signature (a Feed): the gallery shows a sample's values, not a picture
    inputs: Any = None


@value(frozen=False)
class ReportPaths:
    html: Path
    json: Path
    markdown: Path
    junit: Path


def _write(path: Path, data: str) -> None:
    # Replace atomically: a CI job or a browser may be reading the previous report.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, path)


def write_report(inp: ReportInput, out_dir: Path) -> ReportPaths:
    """Write report.html, report.json, summary.md and junit.xml into `out_dir`; returns their paths."""
    import json

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = ReportPaths(out_dir / "report.html", out_dir / "report.json", out_dir / "summary.md",
                        out_dir / "junit.xml")
    rows = summary_rows(inp)
    _write(paths.json, json.dumps(_text.json_document(inp, rows), indent=1, allow_nan=False) + "\n")
    _write(paths.markdown, _text.markdown(inp, rows, paths.html.name))
    _write(paths.junit, _text.junit_xml(inp, rows))
    _write(paths.html, _html.render(inp, rows, started=t0))
    return paths
