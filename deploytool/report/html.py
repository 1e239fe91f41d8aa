"""The HTML report: one self-contained file (inline CSS, JS and SVG, images as
data: URIs, a Content-Security-Policy that forbids any outside fetch) with the
header, summary table, plots, confusion difference, flipped-sample gallery and
provenance of one run. Python builds plain view data (here and in figures.py);
the Jinja2 templates in templates/ lay it out and autoescape every value except
svg.py's SVG, CSS and JS from static/. It reads `ReportRow`s from `summary_rows`,
never a Result, and never recomputes a comparison or changes a verdict.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from deploytool import __version__
from deploytool.report import figures, tasks
from deploytool.report.numbers import (
    MISSING,
    fmt_bytes,
    fmt_cosine,
    fmt_count,
    fmt_float,
    fmt_ms,
    fmt_pct,
    fmt_points,
    fmt_ratio,
    num,
)
from deploytool.report.pairs import backend_of, backend_pairs, converter_pairs
from deploytool.report.text import SCHEMA_VERSION, clean, counts_of, first_line, overall
from deploytool.result import FAILING_STATUSES, MEMORY_MEANING, Check, format_tolerance
from deploytool.workspace import cache_home

if TYPE_CHECKING:
    from deploytool.report import ReportInput
    from deploytool.report.rows import ReportRow

_REQUEST_KEYS = ("frameworks", "formats", "quantize", "targets", "backends", "devices", "delegate", "target", "format")
_KEY_VERSIONS = ("tensorflow", "keras", "torch", "onnxruntime", "ai-edge-litert", "tf2onnx", "tensorflowjs",
                 "litert-torch", "numpy")
# Inline styles (style="" attributes, in SVG too) need 'unsafe-inline'; the one script is allowed by its hash only.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src '{script_hash}'"


# ---------------------------------------------------------------- what the templates see of a row
def _pill(row: "ReportRow") -> str:
    """The class of a row's outcome pill: its verdict when measured, else failing or skipped. (A row from
    summary_rows, the report's only reader of a Result, carries everything else every section shows.)"""
    return row.outcome if row.status == "measured" else "failing" if row.failing else "skip"


# ---------------------------------------------------------------- templates and static files
@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("deploytool.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=_finalize, keep_trailing_newline=True, bytecode_cache=_bytecode_cache(jinja2))
    env.filters.update(fmt_pct=fmt_pct, fmt_points=fmt_points, fmt_ratio=fmt_ratio, fmt_ms=fmt_ms,
                       fmt_bytes=fmt_bytes, fmt_float=fmt_float, fmt_count=fmt_count, fmt_cosine=fmt_cosine,
                       first_line=first_line,
                       sort_value=_sort_value, value=_value, g4=_g4, pill_class=_pill)
    return env


def _bytecode_cache(jinja2: Any) -> Any:
    """Compiled templates cached on disk (keyed by each template's source checksum): compiling them costs about
    0.6 s per process, a cached load a few ms. No cache where the cache folder cannot be written."""
    import os

    root = cache_home() / f"jinja-{jinja2.__version__}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK):
            return None
    except OSError:
        return None

    class BestEffortCache(jinja2.FileSystemBytecodeCache):
        """A cache folder removed while the process lives (a long lab driver; tests that move $HOME) costs a
        compile, never the report."""

        def load_bytecode(self, bucket: Any) -> None:
            try:
                super().load_bytecode(bucket)
            except OSError:
                pass

        def dump_bytecode(self, bucket: Any) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    return BestEffortCache(str(root))


def _finalize(v: Any) -> Any:
    # Converter logs carry ANSI colour codes and control characters: no text reaches the page with them.
    # (isprintable() is the fast path: most values are short words and numbers.)
    return clean(v) if isinstance(v, str) and not isinstance(v, Markup) and not v.isprintable() else v


@lru_cache(maxsize=None)
def _static(name: str) -> str:
    # beside this file (importlib.resources would cost every migrate 3 ms of imports to say the same)
    return (Path(__file__).parent / "static" / name).read_text(encoding="utf-8")


def _script_hash(js: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")


def _template(name: str, **context: Any) -> Markup:
    return Markup(_environment().get_template(name).render(**context))


# ---------------------------------------------------------------- formatting helpers (filters)
def _sort_value(v: Any) -> str:
    f = num(v)
    return "" if f is None else f"{f:.10g}"  # cells without a finite number sort as empty


def _g4(v: Any) -> str:
    f = num(v)
    return MISSING if f is None else f"{f:.4g}"


def _exact(v: Any) -> str:
    """A number in full (for a tooltip), or n/a when it is missing or not finite."""
    f = num(v)
    return MISSING if f is None else repr(v) if isinstance(v, (int, float)) else f"{f:.10g}"


def _plain(v: Any, key: str = "") -> str:
    """A value as a reader wants it: units from the key's suffix, lists joined, short floats."""
    if isinstance(v, bool) or v is None:
        return str(v).lower() if isinstance(v, bool) else "—"
    if isinstance(v, (int, float)):
        if num(v) is None:  # NaN, ±inf
            return MISSING
        if key.endswith("_bytes"):
            return f"{fmt_bytes(v)} ({v:,.0f} B)" if abs(v) >= 1024 else fmt_bytes(v)
        if key.endswith("_ms"):
            return f"{fmt_ms(v)} ms"
        return f"{v:.6g}" if isinstance(v, float) else str(v)
    if isinstance(v, (list, tuple)):
        return ", ".join(_plain(x) for x in v) or "—"
    if isinstance(v, dict):
        return " · ".join(f"{k}: {_plain(x, str(k))}" for k, x in v.items()) or "—"
    return str(v)


def _value(v: Any, limit: int = 400, key: Any = "") -> str:
    s = clean(_plain(v, str(key)))
    return s if len(s) <= limit else s[: limit - 1] + "…"


# ---------------------------------------------------------------- header and provenance facts
def _versions(inp: "ReportInput") -> dict[str, str]:
    out: dict[str, str] = {}
    host = inp.run_info.get("host")
    sources = [inp.run_info.get("versions"), host.get("versions") if isinstance(host, dict) else None]
    sources += [(b.get("provenance") or {}).get("versions") for b in inp.baselines.values()]
    for src in sources:
        if isinstance(src, dict):
            for k, v in src.items():
                out.setdefault(str(k), str(v))
    return out


def _host_text(inp: "ReportInput") -> str:
    host = inp.run_info.get("host")
    if isinstance(host, dict):
        parts = [host.get("hostname") or host.get("node"), host.get("cpu_model"),
                 f"{host['cpu_count']} CPUs" if host.get("cpu_count") else None, host.get("platform")]
        return " · ".join(str(p) for p in parts if p)
    prov = next((b.get("provenance") or {} for b in inp.baselines.values()), {})
    parts = [host, prov.get("cpu_model"), prov.get("platform")]
    return " · ".join(str(p) for p in parts if p) or "—"


def _header(inp: "ReportInput", counts: dict[str, Any], versions: dict[str, str],
            view: "tasks.TaskView", rows: list["ReportRow"]) -> dict[str, Any]:
    """The header's facts; what it says of the test set and of each baseline's quality is the task's."""
    ov = overall(counts)
    req = inp.run_info.get("request") or inp.run_info
    # a test set without labels has no y_true: its size is the baselines' sample count
    samples = len(inp.y_true) or max((int(n) for b in inp.baselines.values() if (n := num(b.get("num_samples")))),
                                     default=0)
    return {
        "model": inp.model, "dataset": inp.dataset, "overall": ov,
        "overall_pill": ov if ov in ("pass", "degraded", "fail") else "skip",
        "run_id": inp.run_id, "created_at": inp.run_info.get("created_at") or "—", "host": _host_text(inp),
        "samples": tasks.dataset_words(view, samples, len(inp.labels)),
        "request": [(k, _value(v, 120)) for k, v in req.items()
                    if k in _REQUEST_KEYS and v not in (None, "", [], ())],
        "baselines": [{"framework": fw, "quality": _baseline_quality(view, fw, b, rows),
                       "p50_ms": fmt_ms((b.get("latency") or {}).get("p50_ms")), "size": fmt_bytes(b.get("size_bytes"))}
                      for fw, b in sorted(inp.baselines.items())],
        "versions": [(k, versions[k]) for k in _KEY_VERSIONS if k in versions],
        "data_warnings": [str(w) for w in inp.run_info.get("data_warnings") or []] + tasks.weak_set_warnings(rows),
    }


def _baseline_quality(view: "tasks.TaskView", fw: str, baseline: dict[str, Any], rows: list["ReportRow"]) -> str:
    """`accuracy 98.40%`, `RMSE 0.3444`, or "" where the task has no baseline figure (raw outputs, no labels)."""
    value = tasks.baseline_value(view, fw, baseline, rows)
    return "" if value is None else f"{view.size.head} {tasks.text_of(view.size, value)}"


def _provenance(inp: "ReportInput", rows: list["ReportRow"], versions: dict[str, str]) -> dict[str, Any]:
    cards = [("Run", {k: v for k, v in inp.run_info.items() if k not in ("versions", "host")})]
    host = inp.run_info.get("host")
    if host:
        cards.append(("Host", {k: v for k, v in host.items() if k != "versions"} if isinstance(host, dict)
                      else {"host": host}))
    cards.append(("Versions", dict(sorted(versions.items()))))
    for fw, b in sorted(inp.baselines.items()):
        facts = {"accuracy": fmt_pct(b["accuracy"]) if num(b.get("accuracy")) is not None else None,
                 "samples": b.get("num_samples"),
                 "latency": b.get("latency"), "memory_bytes": b.get("memory_bytes"),
                 "size_bytes": b.get("size_bytes"), "artifact_sha256": b.get("artifact_sha256"),
                 **{k: v for k, v in (b.get("provenance") or {}).items() if k != "versions"}}
        cards.append((f"Baseline: {fw}", {k: v for k, v in facts.items() if v is not None}))
    details = []
    for v in rows:
        art = {k: x for k, x in v.artifact.items() if k != "notes"}
        stage_text = " · ".join(f"{k} {num(s):.3f} s" for k, s in v.stage_seconds.items() if num(s) is not None)
        measurement = {"memory_bytes": v.memory_by_name or None, "tolerances": v.tolerances or None,
                       "stage_seconds": stage_text or None, "load_ms": v.load_ms,
                       "first_inference_ms": v.first_inference_ms, "throughput_sps": v.throughput_sps,
                       "mean_abs_error": v.mean_abs_error, "outputs": v.outputs_path, "combo_key": v.combo_key}
        conv = " ".join(str(x) for x in (art.get("converter"), art.get("converter_version")) if x)
        details.append({"row": v, "artifact": art, "line": " · ".join(x for x in (conv, stage_text) if x),
                        "measurement": {k: x for k, x in measurement.items() if x is not None}})
    return {"cards": cards, "rows": details}


# ---------------------------------------------------------------- summary
def _summary(rows: list["ReportRow"], counts: dict[str, Any], view: "tasks.TaskView") -> dict[str, Any]:
    attention = [{"row": v, "regression": "; ".join(v.regression),
                  "why": "; ".join(v.broken) if v.status == "measured" else first_line(v.reason, 300)}
                 for v in rows if v.failing or v.regression]
    return {"counts": counts, "attention": attention, "matrix": Markup(figures.matrix(rows, view)),
            "matrix_shows": view.headline.title, "table": _summary_table(rows, view), "pairs": _pairs(rows), "backend_pairs": _backend_pairs(rows),
            "statuses": [(s, n, "failing" if s in FAILING_STATUSES else "skip")
                         for s, n in counts["statuses"].items() if s != "measured"]}


def _pairs(rows: list["ReportRow"]) -> list[dict[str, Any]]:
    """Converters of one source side by side (same format, quantization and place)."""

    return [{"pair": p, "sentence": p.sentence} for p in converter_pairs(rows)]


def _backend_pairs(rows: list["ReportRow"]) -> list[dict[str, Any]]:
    """One file on wasm and on the target's other backends (webgpu), with where each ran (the WebGPU adapter)."""
    by_label = {r.label: r for r in rows}
    out = []
    for p in backend_pairs(rows):
        lines = []
        for e in p.entries:
            r = by_label[e.label]
            lines.append({"e": e, "gpu": r.environment.get("gpu") or "", "p50_ms": r.p50_ms,
                          "backend": backend_of(r)[1]})
        out.append({"pair": p, "lines": lines, "sentence": p.sentence})
    return out


def _summary_table(rows: list["ReportRow"], view: "tasks.TaskView | None" = None) -> Markup:
    """The sortable table of every row plus its footnotes (memory figures, tolerances used, notes); its quality
    columns and their legend are the run's task's (deploytool.report.tasks)."""
    view = view or tasks.view_of(rows)
    notes: dict[str, int] = {}
    mem_names: dict[str, str] = {}
    tolerance_sets: dict[str, list[str]] = {}
    lines = []
    for i, v in enumerate(rows, 1):
        line: dict[str, Any] = {
            "i": i, "row": v, "mem_letter": "", "mem_title": "", "ratio_title": "", "unlike": False,
            "cls": ("failing" if v.failing else "degraded" if v.verdict == "degraded"
                    else "skipped" if v.status != "measured" else ""),
            "broken": [_check_view(c) for c in v.checks if c.outcome != "pass"],
            "quality": tasks.cells(view, v),
            "marks": [notes.setdefault(n, len(notes) + 1) for n in v.notes]}
        if v.memory_figures and v.memory_bytes is not None:
            tgt, base = (list(v.memory_figures) + [None])[:2]
            pair = f"{tgt}" + (f" ÷ baseline {base}" if base else "")
            line.update(mem_letter=mem_names.setdefault(pair, "abcdefghijklmnopqrstuvwxyz"[len(mem_names) % 26]),
                        mem_title=pair, ratio_title=pair)
            if base and base != tgt:
                line.update(unlike=True,
                            ratio_title=f"not like for like: the target's {tgt} divided by the baseline's {base}")
        if v.status == "measured":
            line["title"] = "\n".join(
                f"{c.metric}: {_exact(c.value)} ({format_tolerance(c.metric, (c.pass_limit, c.fail_limit))})"
                f" → {c.outcome}" for c in v.checks)
            if v.tolerances:
                tolerance_sets.setdefault(json.dumps(v.tolerances, sort_keys=True), []).append(v.label)
        else:
            line.update(title=clean(v.reason)[:2000], reason=first_line(v.reason, 220))
        lines.append(line)
    tolerances = [("; ".join(f"{m}: {format_tolerance(m, tuple(lim))}" for m, lim in json.loads(key).items()), labels)
                  for key, labels in tolerance_sets.items()]
    mem_meanings = {pair: MEMORY_MEANING.get(pair.split(" ÷ ")[0], "") for pair in mem_names}
    return _template("summary_table.html.j2", lines=lines, mem_names=mem_names, mem_meanings=mem_meanings,
                     tolerances=tolerances, task=view.task, legend=view.legend,
                     quality_heads=[(c.head, "n", c.title) for c in view.columns],
                     notes=list(notes), any_unlike=any(line["unlike"] for line in lines))


def _check_view(c: Check) -> dict[str, Any]:
    """The words of `agreement 0.9625 degraded (pass if >= 0.98, fail below 0.95)`: value, outcome, the limits met."""
    return {"metric": c.metric, "value": c.value, "outcome": c.outcome,
            "limits": format_tolerance(c.metric, (c.pass_limit, c.fail_limit))}


# ---------------------------------------------------------------- the page
def render(inp: "ReportInput", rows: list["ReportRow"], started: float | None = None) -> str:
    t0 = started if started is not None else time.perf_counter()
    counts = counts_of(rows)
    versions = _versions(inp)
    view = tasks.view_of(rows)
    context = {"header": _header(inp, counts, versions, view, rows), "summary": _summary(rows, counts, view),
               "gallery_per_row": figures.GALLERY_PER_ROW, "provenance": _provenance(inp, rows, versions),
               "view": view, **_task_figures(inp, rows, view)}
    js = _static("report.js")
    return str(_template(
        "report.html.j2", **context, title=f"deploytool · {inp.model} on {inp.dataset} · {inp.run_id}",
        css=Markup(_static("report.css")), js=Markup(js), csp=Markup(_CSP.format(script_hash=_script_hash(js))),
        version=__version__, schema_version=SCHEMA_VERSION, elapsed_ms=1000 * (time.perf_counter() - t0)))


def _task_figures(inp: "ReportInput", rows: list["ReportRow"], view: "tasks.TaskView") -> dict[str, Any]:
    """The plots and the optional sections the run's task has (deploytool.report.tasks); the others empty."""
    flips = figures.with_flips(rows) if view.sections & {"confusion", "gallery"} else []
    # SVG from svg.py escapes its own text: it is the only markup from results the templates receive as such
    return {"plots": {k: Markup(s) for k, s in figures.plots(inp, rows, view).items()},
            "confusion": figures.confusion(inp, flips) if "confusion" in view.sections else {"tables": [], "rest": []},
            "gallery": figures.gallery(inp, flips) if "gallery" in view.sections else [],
            "outputs": figures.outputs_table(rows) if "outputs" in view.sections else [],
            "regression_plots": [Markup(s) for s in figures.regression_scatters(inp, rows)]
            if "fits" in view.plots else [],
            "output_plot": Markup(figures.output_errors(rows) if "per_output" in view.plots else "")}
