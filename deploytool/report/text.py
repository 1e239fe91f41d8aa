"""The report's text forms: a JSON document with a stable, versioned schema for
machines, a short Markdown summary for a CI comment (its quality columns are the
run's task's: deploytool.report.tasks), JUnit XML for CI test views and a plain
table for the terminal; numbers are written by deploytool.report.numbers. It
formats `ReportRow`s already built by `summary_rows`; it never loads results,
reads sample files or judges a verdict.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Callable

from deploytool.report import tasks
from deploytool.report.markdown import prose
from deploytool.report.numbers import fmt_bytes, fmt_ms, fmt_ratio, num
from deploytool.errors import first_line_of

if TYPE_CHECKING:
    from deploytool.report import ReportInput
    from deploytool.report.rows import ReportRow

SCHEMA_VERSION = 1
SKIPPED_STATUSES = ("not_applicable", "unsupported", "delegate_refused", "interrupted")
_CTRL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean(s: Any) -> str:
    """Text without control characters or ANSI colour codes (converter logs carry them; XML 1.0 forbids them)."""
    return _CTRL.sub("", "" if s is None else str(s))


def first_line(s: Any, limit: int = 200) -> str:
    text = clean(s)
    line = first_line_of(text, len(text))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def outcome(row: "ReportRow") -> str:
    """What a row amounts to: its verdict when measured, else its status."""
    return row.outcome


def overall(counts: dict[str, Any]) -> str:
    if counts["fail"] or counts["failed_statuses"]:
        return "fail"
    if counts["degraded"]:
        return "degraded"
    return "pass" if counts["measured"] else "no results"


def counts_of(rows: list["ReportRow"]) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "rows": len(rows),
        "measured": sum(r.status == "measured" for r in rows),
        "pass": sum(r.verdict == "pass" for r in rows if r.status == "measured"),
        "degraded": sum(r.verdict == "degraded" for r in rows if r.status == "measured"),
        "fail": sum(r.verdict == "fail" for r in rows if r.status == "measured"),
        "failed_statuses": sum(r.failing and r.status != "measured" for r in rows),
        "statuses": dict(sorted(statuses.items())),
        "regressions": sum(bool(r.regression) for r in rows),
    }


def one_line_summary(counts: dict[str, Any]) -> str:
    parts = [f"{counts['rows']} rows", f"{counts['pass']} pass", f"{counts['degraded']} degraded", f"{counts['fail']} fail"]
    other = {s: n for s, n in counts["statuses"].items() if s != "measured"}
    parts += [f"{n} {s}" for s, n in other.items()]
    if counts["regressions"]:
        parts.append(f"{counts['regressions']} regressed vs history")
    return f"{overall(counts).upper()}: " + ", ".join(parts)


# ---------------------------------------------------------------- JSON
def _finite(obj: Any) -> Any:
    """Plain JSON: non-finite numbers become null so any strict parser reads the file."""
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item"):  # numpy scalars
        return _finite(obj.item())
    return str(obj)


def _number(v: Any) -> Any:
    """In this schema a metric is a number or null; older stores kept non-finite floats as strings ("inf")."""
    return num(v) if isinstance(v, str) else v


RESULT_KEYS = ("combo_key", "label", "framework", "format", "quantize", "target", "device", "backend", "status",
               "reason", "verdict", "failing", "triage", "metrics", "checks", "tolerances", "memory_figures", "notes",
               "regression", "artifact", "flipped", "bundle", "task", "outputs")
METRIC_KEYS = ("accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "flipped_count", "max_abs_error",
               "mean_abs_error", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "latency_ratio_p50", "latency_ratio_p90",
               "memory_bytes", "memory_ratio", "size_bytes", "size_ratio", "load_ms", "first_inference_ms",
               "throughput_sps", "latency_samples", "top5_agreement", "cosine_min", "rel_error", "mae", "rmse",
               "baseline_rmse", "mae_increase", "rmse_increase")
ARTIFACT_KEYS = ("format", "quantize", "converter", "converter_version", "sha256", "size_bytes")


def json_document(inp: "ReportInput", rows: list["ReportRow"]) -> dict[str, Any]:
    """report.json: the rows and the run as plain JSON, keys in the schema's order (RESULT_KEYS per row)."""
    results = []
    for row in rows:
        art = row.artifact
        results.append({
            "combo_key": row.combo_key, "label": row.label,
            **{k: getattr(row, k) for k in ("framework", "format", "quantize", "target", "device", "backend", "status")},
            "reason": clean(row.reason), "verdict": row.verdict, "failing": row.failing, "triage": row.triage,
            "metrics": {**{k: _number(getattr(row, k)) for k in METRIC_KEYS}, **row.task_metrics}
                       if row.verdict is not None else {},
            "checks": [asdict(c) for c in row.checks], "tolerances": row.tolerances,
            "memory_figures": row.memory_figures, "notes": row.notes, "regression": row.regression,
            "artifact": {k: art.get(k) for k in ARTIFACT_KEYS},
            "flipped": [asdict(f) for f in row.flipped],
            "bundle": row.bundle,
            "task": row.task,
            "outputs": [{**asdict(o), "shape": list(o.shape)} for o in row.outputs],
        })
    baselines = {fw: {"accuracy": b.get("accuracy"), "latency": b.get("latency") or {},
                      "memory_bytes": b.get("memory_bytes") or {}, "size_bytes": b.get("size_bytes")}
                 for fw, b in sorted(inp.baselines.items())}
    counts = counts_of(rows)
    return _finite({
        "schema_version": SCHEMA_VERSION,
        "run_id": inp.run_id, "model": inp.model, "dataset": inp.dataset,
        "created_at": inp.run_info.get("created_at") or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "run_info": inp.run_info, "baselines": baselines, "results": results,
        "summary": {**counts, "overall": overall(counts)},
    })


# ---------------------------------------------------------------- Markdown
def _md(s: Any) -> str:
    """Prose or a table cell: inert Markdown (deploytool.report.markdown.prose)."""
    return prose(first_line(s, 160))


def _code(s: Any) -> str:
    """Inside a code span of a table row: backticks cannot close it, `|` cannot split the row."""
    return first_line(s, 160).replace("|", "\\|").replace("`", "'")


def markdown(inp: "ReportInput", rows: list["ReportRow"], html_name: str = "report.html") -> str:
    """summary.md: the counts, the baselines' quality, a line per row with the task's brief columns
    (deploytool.report.tasks), then failures and regressions."""
    view = tasks.view_of(rows)
    counts = counts_of(rows)
    base = ", ".join(f"{fw} {tasks.text_of(view.size, v)}" for fw, b in sorted(inp.baselines.items())
                     if (v := tasks.baseline_value(view, fw, b, rows)) is not None)
    icon = {"pass": "✅", "degraded": "⚠️", "fail": "❌"}.get(overall(counts), "➖")
    lines = [f"### deploytool: {_md(inp.model)} on {_md(inp.dataset)} — run `{_code(inp.run_id)}`", "",
             f"{icon} **{one_line_summary(counts)}**" + (f" · baseline {view.size.head} {base}" if base else ""), "",
             *[f"⚠️ test set: {_md(w)}" + "\n" for w in [*(inp.run_info.get("data_warnings") or []),
                                                          *tasks.weak_set_warnings(rows)]],
             f"| combination | {' | '.join(c.head for c in view.brief)} | p50 ms | ×p50 | size | ×size | result |",
             "|---|" + "--:|" * (len(view.brief) + 4) + "---|"]
    for r in rows:
        res = r.outcome + (" ↓" if r.regression else "")
        lines.append(f"| {_md(r.label)} | {' | '.join(c['text'] for c in tasks.cells(view, r, view.brief))} | "
                     f"{fmt_ms(r.p50_ms)} | {fmt_ratio(r.latency_ratio_p50)} | {fmt_bytes(r.size_bytes)} | "
                     f"{fmt_ratio(r.size_ratio)} | {'**' + res + '**' if r.failing else res} |")
    failures = [r for r in rows if r.failing]
    if failures:
        lines += ["", "**Failures**", ""]
        for r in failures:
            why = "; ".join(r.broken) if r.status == "measured" else first_line(r.reason) or "no reason recorded"
            lines.append(f"- `{_code(r.label)}` — {r.outcome}" + (f" [{r.triage}]" if r.triage else "") + f": {_md(why)}"
                         + (f" (reproducer: `{r.bundle}/`)" if r.bundle else ""))
    regressed = [r for r in rows if r.regression and not r.failing]
    if regressed:
        lines += ["", "**Regressions against earlier runs**", ""]
        lines += [f"- `{_code(r.label)}` — {_md('; '.join(r.regression))}" for r in regressed]
    lines += ["", f"<sub>Full report: `{html_name}` ({', '.join(tasks.contents(view))}).</sub>", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- JUnit XML
def junit_xml(inp: "ReportInput", rows: list["ReportRow"]) -> str:
    """One testcase per row: a failure for verdict fail or a failing status, skipped where nothing could run."""
    suite = ET.Element("testsuite", name=clean(f"deploytool.{inp.model}.{inp.dataset}"))
    n_fail = n_skip = 0
    total_s = 0.0
    for row in rows:
        seconds = sum(v for v in (num(x) for x in row.stage_seconds.values()) if v)
        total_s += seconds
        case = ET.SubElement(suite, "testcase", classname=clean(f"{inp.model}.{row.framework}.{row.target}"),
                             name=clean(row.label), time=f"{seconds:.3f}")
        if row.failing:
            n_fail += 1
            if row.status == "measured":
                msg = "; ".join(row.broken) or "verdict fail"
                ET.SubElement(case, "failure", message=clean(first_line(msg, 500)), type="verdict_fail").text = \
                    clean("\n".join(row.broken))
            else:
                ET.SubElement(case, "failure", message=clean(first_line(row.reason, 500)) or row.status,
                              type=row.status).text = clean(row.reason)
        elif row.status != "measured":
            n_skip += 1
            ET.SubElement(case, "skipped", message=clean(f"{row.status}: {first_line(row.reason, 500)}"))
        out = [f"verdict: {row.verdict}"] if row.status == "measured" else []
        out += [*row.broken, *(f"regression: {x}" for x in row.regression), *(f"note: {n}" for n in row.notes)]
        if out:
            ET.SubElement(case, "system-out").text = clean("\n".join(out))
    suite.set("tests", str(len(rows)))
    suite.set("failures", str(n_fail))
    suite.set("errors", "0")
    suite.set("skipped", str(n_skip))
    suite.set("time", f"{total_s:.3f}")
    suite.set("timestamp", clean(inp.run_info.get("created_at") or ""))
    root = ET.Element("testsuites", name=clean(f"deploytool run {inp.run_id}"), tests=str(len(rows)),
                      failures=str(n_fail), errors="0", skipped=str(n_skip), time=f"{total_s:.3f}")
    root.append(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---------------------------------------------------------------- terminal
def terminal_columns(rows: list["ReportRow"]) -> list[tuple[str, Callable[["ReportRow"], str]]]:
    """The plain table's columns: the combination, the run's task's brief columns (deploytool.report.tasks, as
    in summary.md), latency, size and the result."""
    view = tasks.view_of(rows)
    return [("combination", lambda r: r.label),
            *((c.head, lambda r, c=c: tasks.text_of(c, tasks.metric_of(r, c.attr))) for c in view.brief),
            ("p50 ms", lambda r: fmt_ms(r.p50_ms)), ("×p50", lambda r: fmt_ratio(r.latency_ratio_p50)),
            ("size", lambda r: fmt_bytes(r.size_bytes)), ("result", lambda r: r.outcome + (" ↓" if r.regression else ""))]


def plain_table(rows: list["ReportRow"]) -> str:
    """The summary as a fixed-width table for a terminal (no colours: the CLI may add them)."""
    columns = terminal_columns(rows)
    cells = [[h for h, _ in columns]] + [[f(r) for _, f in columns] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(v.ljust(w) if i in (0, len(c) - 1) else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
