"""`Row`: one result of a run as the Python API (deploytool.api), `deploytool report RUN --format csv|parquet` and
a notebook's table see it — the report.json row, typed. Made from a `Result` by `row_of`, reading the figures the
report reads (`Result.metrics`, its Comparison's outputs and checks); it computes no metric of its own. Also the
flat form of rows (one dict of scalars per row: CSV, Parquet, a DataFrame) and the small HTML table a notebook
shows. Pure: rows in, text or tables out; it never opens the store."""

from __future__ import annotations

import csv
import html
import io
from dataclasses import field
from pathlib import Path
from typing import Any, Iterable, Mapping

from deploytool.errors import UnknownOption
from deploytool.report import tasks
from deploytool.report.numbers import fmt_bytes, fmt_ms, num
from deploytool.report.text import METRIC_KEYS, clean
from deploytool.result import Check, OutputComparison, Result
from deploytool.value import value

__all__ = ["Row", "row_of", "flat", "csv_text", "write_parquet", "html_table"]


@value
class Row:
    """One combination of a run and what became of it. `metrics` holds report.json's numbers (every key of
    `deploytool.report.text.METRIC_KEYS`, None where missing; empty unless the row was measured); the fields
    below it are the ones most asked for, taken from it. `outputs` compares each model output with the PC
    baseline's; `bundle` is the reproducer folder of a failing row."""

    run_id: str
    combo_key: str
    label: str  # "keras->onnx/none on web:wasm"
    framework: str
    format: str
    quantize: str
    target: str
    backend: str
    device: str
    runtime: str
    status: str  # measured, conversion_failed, runtime_failed, unsupported, ...
    verdict: str | None  # pass / degraded / fail; None unless measured
    failing: bool
    reason: str
    triage: str | None  # a failing row's class: internal_error, unsupported, environment, upstream, expected
    task: str
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    outputs: tuple[OutputComparison, ...] = ()
    checks: tuple[Check, ...] = ()
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    bundle: Path | None = None

    @property
    def where(self) -> str:
        """`web:wasm`, `host[tensorflow-lite]`, `android:xnnpack@SERIAL`."""
        return self.label.rpartition(" on ")[2]

    @property
    def agreement(self) -> float | None:
        return self.metrics.get("agreement")

    @property
    def accuracy(self) -> float | None:
        return self.metrics.get("accuracy")

    @property
    def rmse_increase(self) -> float | None:
        return self.metrics.get("rmse_increase")

    @property
    def p50_ms(self) -> float | None:
        return self.metrics.get("p50_ms")

    @property
    def latency_ratio(self) -> float | None:
        """The row's p50 over its PC baseline's (paired on the host: deploytool.latency)."""
        return self.metrics.get("latency_ratio_p50")

    @property
    def memory_bytes(self) -> float | None:
        return self.metrics.get("memory_bytes")

    @property
    def size_bytes(self) -> float | None:
        return self.metrics.get("size_bytes")

    def matches(self, **fields: Any) -> bool:
        """Whether every given field equals its value (`format="onnx", target="web"`); "" matches "" only."""
        return all(str(getattr(self, k)) == str(v) for k, v in fields.items())


def row_of(r: Result) -> Row:
    """The Row of a Result: the same values report.json writes of it."""
    c, m = r.comparison, r.metrics
    art = r.artifact.to_json() if r.artifact is not None else {}
    metrics: dict[str, float | None] = {}
    if r.verdict is not None:
        metrics = {k: num(m.get(k)) for k in (*METRIC_KEYS, *(c.task_metrics if c is not None else ()))}
        metrics["size_bytes"] = num(m.get("size_bytes", art.get("size_bytes")))
    return Row(
        run_id=r.run_id, combo_key=r.combo_key, label=r.combo.label, framework=r.combo.framework,
        format=r.combo.format, quantize=r.combo.quantize, target=r.combo.target, backend=r.combo.backend,
        device=r.combo.device, runtime=r.combo.runtime, status=str(r.status),
        verdict=str(r.verdict) if r.verdict is not None else None, failing=r.failing, reason=clean(r.reason),
        triage=r.triage.klass if r.triage is not None else None, task=c.task if c is not None else "classification",
        metrics=metrics, outputs=tuple(c.outputs) if c is not None else (), checks=tuple(c.checks) if c is not None else (),
        tolerances={k: (float(v[0]), float(v[1])) for k, v in r.tolerances.items()},
        notes=tuple(dict.fromkeys(clean(n) for n in [*r.notes, *(art.get("notes") or [])])),
        bundle=Path(r.bundle) if r.bundle else None)


_KEYS = ("run_id", "combo_key", "label", "framework", "format", "quantize", "target", "backend", "device", "runtime", "status",
         "verdict", "failing", "triage", "task", "reason")
_OUTPUT_KEYS = ("max_abs_error", "mean_abs_error", "rel_error", "cosine_min", "cosine_mean", "exact_match")


def flat(row: Row) -> dict[str, Any]:
    """The row as one level of scalars: its words, every metric, each output's error as `output.NAME.METRIC`,
    and the bundle's path (CSV, Parquet and DataFrame columns)."""
    out: dict[str, Any] = {k: getattr(row, k) for k in _KEYS}
    out.update({k: row.metrics.get(k) for k in (*METRIC_KEYS, *row.metrics)})
    for o in row.outputs:
        out.update({f"output.{o.name}.{k}": num(getattr(o, k)) for k in _OUTPUT_KEYS})
    out["bundle"] = str(row.bundle) if row.bundle else None
    return out


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for r in rows for k in r))  # first seen first: outputs after the metrics


def csv_text(rows: Iterable[Row]) -> str:
    """The rows as CSV with a header line (an empty cell: None)."""
    flats = [flat(r) for r in rows]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_columns(flats) or list(_KEYS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(flats)
    return buf.getvalue()


def write_parquet(rows: Iterable[Row], path: Path) -> Path:
    """The rows as a Parquet file (pyarrow, when installed)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UnknownOption("--format parquet needs pyarrow, which is not installed; `pip install pyarrow`, "
                            "or use --format csv") from None
    flats = [flat(r) for r in rows]
    columns = _columns(flats) or list(_KEYS)
    table = pa.table({c: [f.get(c) for f in flats] for c in columns})
    pq.write_table(table, str(path))
    return path


def _headline(row: Row) -> str:
    """The row's number the report's verdict matrix shows, by its task's view (deploytool.tasks)."""
    if row.verdict is None:
        return ""
    column = tasks.view_for(row.task, labelled=row.accuracy is not None).headline
    return f"{column.head} {tasks.text_of(column, num(row.metrics.get(column.attr)))}"


def html_table(rows: Iterable[Row], caption: str = "") -> str:
    """A small HTML summary table (what Jupyter shows of a Run): one line per row, every value escaped."""
    head = ("row", "outcome", "quality", "p50 ms", "× PC p50", "size", "reason")
    lines = []
    for r in rows:
        ratio = r.latency_ratio
        cells = (r.label, r.verdict or r.status, _headline(r), fmt_ms(r.p50_ms) if r.verdict else "",
                 f"{ratio:.3g}" if ratio is not None else "", fmt_bytes(r.size_bytes) if r.verdict else "",
                 r.reason[:120])
        style = ' style="color:#b00"' if r.failing else ""
        lines.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return ("<table>" + cap + "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(lines) + "</tbody></table>")
