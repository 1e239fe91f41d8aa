"""The report of one run: a self-contained HTML page (summary table, plots,
confusion difference, flipped-sample gallery, provenance), a JSON document
with a versioned schema, a Markdown summary for CI comments and JUnit XML.
Everything is built from stored `Result`s and baselines; the report never
runs a model, recomputes a comparison or changes a verdict. It must stay fast
(well under a second for a full matrix): it reads only the latency sample files
and never the per-sample output arrays, since the flip lists already say which
samples changed.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.report import html as _html
from deploytool.report import text as _text
from deploytool.result import Result, format_tolerance, primary_memory

__all__ = ["ReportInput", "ReportPaths", "write_report", "summary_rows"]

# Reading order of the matrix: source framework, format, then quantization from the lightest touch.
_FORMAT_ORDER = ("keras", "torch", "saved_model", "tflite", "tfjs_graph", "tfjs_layers", "onnx")
_QUANT_ORDER = ("none", "fp16", "dynamic", "int8", "int8-io", "uint8", "uint16")


@dataclass
class ReportInput:
    run_id: str
    model: str
    dataset: str
    run_info: dict[str, Any]  # request, created_at, host, versions, ...
    results: list[Result]
    baselines: dict[str, dict[str, Any]]  # framework -> asdict(Baseline)
    labels: list[str]  # class names
    y_true: np.ndarray  # (N,) int
    images: np.ndarray  # (N, H, W, C) float in [0, 1], for the gallery
    history: dict[str, Result] = field(default_factory=dict)  # combo_key -> earlier measured result


@dataclass
class ReportPaths:
    html: Path
    json: Path
    markdown: Path
    junit: Path


def _order(v: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(v), "") if v in order else (len(order), v)


def _sort_key(r: Result) -> tuple:
    c = r.combo
    return (c.framework, _order(c.format, _FORMAT_ORDER), _order(c.quantize, _QUANT_ORDER), c.target, c.backend,
            c.device, c.runtime)


def _regressions(r: Result, prev: Result | None) -> list[str]:
    """What got worse since the same combination was last measured (history holds measured results only)."""
    if prev is None:
        return []
    since = f"run {prev.run_id}"
    if r.comparison is None:
        return [f"was measured ({prev.verdict}) in {since}, now {r.status}"]
    out = []
    acc = _text.num(r.comparison.accuracy)
    before = _text.num(prev.comparison.accuracy) if prev.comparison is not None else None
    if acc is not None and before is not None and acc < before - 1e-12:
        out.append(f"accuracy {100 * before:.2f}% → {100 * acc:.2f}% since {since}")
    if r.verdict is not None and prev.verdict is not None and r.verdict.rank > prev.verdict.rank:
        out.append(f"verdict {prev.verdict} → {r.verdict} since {since}")
    return out


def summary_rows(inp: ReportInput) -> list[dict[str, Any]]:
    """The report's one view of the results: a dict per result in reading order, raw numbers (None when
    missing) plus the derived words the tables need. Templates and writers read rows, never a Result."""
    rows = []
    for r in sorted(inp.results, key=_sort_key):
        m, comp, meas = r.metrics, r.comparison, r.measurement
        art = r.artifact.to_json() if r.artifact is not None else {}
        memory = dict(meas.memory_bytes) if meas is not None else {}
        figures = comp.memory_figures if comp is not None else None
        if not figures and memory:
            pm = primary_memory({k: v for k, v in memory.items() if _text.num(v)})
            figures = (pm[0], None) if pm else None
        checks = [asdict(c) for c in comp.checks] if comp is not None else []
        notes = list(dict.fromkeys([_text.clean(n) for n in list(r.notes) + list(art.get("notes") or [])]))
        rows.append({
            "combo_key": r.combo_key, "label": r.combo.label, "where": r.combo.where,
            "framework": r.combo.framework, "format": r.combo.format, "quantize": r.combo.quantize,
            "target": r.combo.target, "backend": r.combo.backend, "device": r.combo.device,
            "runtime": r.combo.runtime,
            "status": str(r.status), "reason": _text.clean(r.reason),
            "verdict": str(r.verdict) if r.verdict is not None else None, "failing": r.failing,
            **{k: _text.num(m.get(k)) for k in (
                "accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "flipped_count",
                "max_abs_error", "mean_abs_error", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "latency_ratio_p50",
                "latency_ratio_p90", "memory_bytes", "memory_ratio", "load_ms", "first_inference_ms",
                "throughput_sps", "size_ratio", "latency_samples")},
            "memory_figures": list(figures) if figures else None,
            "size_bytes": _text.num(m.get("size_bytes", art.get("size_bytes"))),
            "checks": checks,
            "broken": [describe_check(c) for c in checks if c.get("outcome") != "pass"],
            "tolerances": {k: list(v) for k, v in r.tolerances.items()},
            "notes": notes,
            "regression": _regressions(r, inp.history.get(r.combo_key)),
            # the reproducer bundle (deploytool.bugs.bundle) lives beside the report, in bugs/<name>/
            "bundle": f"bugs/{Path(r.bundle).name}" if r.bundle else None,
            # what the detail sections show
            "artifact": art, "environment": dict(r.environment), "memory_by_name": memory,
            "stage_seconds": asdict(r.times), "flipped": [asdict(f) for f in comp.flipped] if comp is not None else [],
            "latency_path": r.latency_path or None, "outputs_path": r.outputs_path or None,
        })
    return rows


def describe_check(c: dict[str, Any]) -> str:
    """`agreement = 0.951 → fail (pass if >= 0.99, fail below 0.97)`: the value and the tolerance it met."""
    f = _text.num(c.get("value"))
    value = "n/a" if f is None else f"{f:.6g}"
    limits = format_tolerance(c["metric"], (c["pass_limit"], c["fail_limit"]))
    return f"{c.get('metric')} = {value} → {c.get('outcome')} ({limits})"


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
