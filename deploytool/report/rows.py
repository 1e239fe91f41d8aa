"""`ReportRow`: the report's one view of a result, and `summary_rows`, which makes them — the only reader of a
`Result` in the report. A row holds raw numbers (None when missing or not finite) plus the derived words the
tables need; the writers (text.py, html.py, figures.py, pairs.py) read rows, never a Result. JSON happens only
at the edge: text.json_document writes report.json from rows."""

from __future__ import annotations

from dataclasses import asdict, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploytool.report.numbers import num
from deploytool.report.text import clean
from deploytool.result import Check, Flip, OutputComparison, Result, format_tolerance, primary_memory
from deploytool.value import value

if TYPE_CHECKING:
    from deploytool.report import ReportInput

# Reading order of the matrix: source framework, format, then quantization from the lightest touch.
_FORMAT_ORDER = ("keras", "torch", "saved_model", "tflite", "tfjs_graph", "tfjs_layers", "onnx")
TASK_METRICS = ("top5_agreement", "cosine_min", "rel_error", "mae", "rmse", "baseline_rmse", "mae_increase",
                "rmse_increase")
_QUANT_ORDER = ("none", "fp16", "dynamic", "int8", "int8-io", "uint8", "uint16")


@value
class ReportRow:
    """One result as every table, plot and text form of the report reads it."""

    combo_key: str
    label: str
    where: str
    framework: str
    format: str
    quantize: str
    target: str
    backend: str
    device: str
    runtime: str
    status: str
    reason: str  # without control characters
    verdict: str | None  # None unless measured
    failing: bool
    # metrics: finite numbers, or None when missing or not finite
    accuracy: float | None = None
    baseline_accuracy: float | None = None
    accuracy_delta_points: float | None = None
    agreement: float | None = None
    flipped_count: float | None = None
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    latency_ratio_p50: float | None = None
    latency_ratio_p90: float | None = None
    memory_bytes: float | None = None
    memory_ratio: float | None = None
    load_ms: float | None = None
    first_inference_ms: float | None = None
    throughput_sps: float | None = None
    size_ratio: float | None = None
    latency_samples: float | None = None
    memory_figures: tuple[str | None, ...] | None = None  # (target figure, baseline figure) behind memory numbers
    size_bytes: float | None = None
    checks: tuple[Check, ...] = ()
    broken: tuple[str, ...] = ()  # describe_check of each check that did not pass
    tolerances: dict[str, tuple[float, ...]] = field(default_factory=dict)  # metric -> (pass limit, fail limit)
    notes: tuple[str, ...] = ()
    latency_how: str = ""  # one sentence: how latency was measured, how steady the machine was (issue 25)
    regression: tuple[str, ...] = ()  # what got worse since the same combination was last measured
    triage: str | None = None  # a failing row's class: internal_error, unsupported, environment, upstream, expected
    triage_why: str = ""  # its evidence in one line
    bundle: str | None = None  # the reproducer bundle (deploytool.bugs.bundle), relative to the report: bugs/<name>
    # what the detail sections show
    artifact: dict[str, Any] = field(default_factory=dict)  # the converted model's facts (Artifact.to_json)
    environment: dict[str, Any] = field(default_factory=dict)
    memory_by_name: dict[str, float] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    flipped: tuple[Flip, ...] = ()
    latency_path: str | None = None
    outputs_path: str | None = None
    # what the first output is judged as, and the metrics of the tasks beyond classification (issue 24)
    task: str = "classification"
    top5_agreement: float | None = None
    cosine_min: float | None = None
    rel_error: float | None = None
    mae: float | None = None
    rmse: float | None = None
    baseline_rmse: float | None = None
    mae_increase: float | None = None
    rmse_increase: float | None = None
    outputs: tuple[OutputComparison, ...] = ()  # every output against the baseline's (empty: older rows)
    scored_output: str = ""  # the output accuracy and agreement are of (a model of several outputs)
    label_agreement: float | None = None  # the smallest share of samples with integer outputs equal to the baseline's
    task_metrics: dict[str, float | None] = field(default_factory=dict)  # a task's own metrics (deploytool.tasks)
    agreement_uninformative: str = ""  # why agreement says nothing on this test set (judged on error and cosine)

    @property
    def outcome(self) -> str:
        """What the row amounts to: its verdict when measured, else its status."""
        return (self.verdict or "measured") if self.status == "measured" else self.status


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
    acc = num(r.comparison.accuracy)
    before = num(prev.comparison.accuracy) if prev.comparison is not None else None
    if acc is not None and before is not None and acc < before - 1e-12:
        out.append(f"accuracy {100 * before:.2f}% → {100 * acc:.2f}% since {since}")
    if r.verdict is not None and prev.verdict is not None and r.verdict.rank > prev.verdict.rank:
        out.append(f"verdict {prev.verdict} → {r.verdict} since {since}")
    return out


def describe_check(c: Check) -> str:
    """`agreement = 0.951 → fail (pass if >= 0.99, fail below 0.97)`: the value and the tolerance it met."""
    f = num(c.value)
    value = "n/a" if f is None else f"{f:.6g}"
    limits = format_tolerance(c.metric, (c.pass_limit, c.fail_limit))
    return f"{c.metric} = {value} → {c.outcome} ({limits})"


def summary_rows(inp: "ReportInput") -> list[ReportRow]:
    """A row per result, in reading order (framework, format, quantization from the lightest touch, place)."""
    rows = []
    for r in sorted(inp.results, key=_sort_key):
        m, comp, meas = r.metrics, r.comparison, r.measurement
        art = r.artifact.to_json() if r.artifact is not None else {}
        memory = dict(meas.memory_bytes) if meas is not None else {}
        figures: tuple[str, str | None] | None = comp.memory_figures if comp is not None else None
        if not figures and memory:
            pm = primary_memory({k: v for k, v in memory.items() if num(v)})
            figures = (pm[0], None) if pm else None
        checks = tuple(comp.checks) if comp is not None else ()
        notes = tuple(dict.fromkeys([clean(n) for n in list(r.notes) + list(art.get("notes") or [])]))
        rows.append(ReportRow(
            combo_key=r.combo_key, label=r.combo.label, where=r.combo.where,
            framework=r.combo.framework, format=r.combo.format, quantize=r.combo.quantize,
            target=r.combo.target, backend=r.combo.backend, device=r.combo.device, runtime=r.combo.runtime,
            status=str(r.status), reason=clean(r.reason),
            verdict=str(r.verdict) if r.verdict is not None else None, failing=r.failing,
            **{k: num(m.get(k)) for k in (
                "accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "flipped_count",
                "max_abs_error", "mean_abs_error", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "latency_ratio_p50",
                "latency_ratio_p90", "memory_bytes", "memory_ratio", "load_ms", "first_inference_ms",
                "throughput_sps", "size_ratio", "latency_samples")},
            memory_figures=tuple(figures) if figures else None,
            size_bytes=num(m.get("size_bytes", art.get("size_bytes"))),
            checks=checks,
            broken=tuple(describe_check(c) for c in checks if c.outcome != "pass"),
            tolerances={k: tuple(v) for k, v in r.tolerances.items()},
            notes=notes,
            latency_how=clean(r.latency_how),
            regression=tuple(_regressions(r, inp.history.get(r.combo_key))),
            # the reproducer bundle (deploytool.bugs.bundle) lives beside the report, in bugs/<name>/
            bundle=f"bugs/{Path(r.bundle).name}" if r.bundle else None,
            triage=r.triage.klass if r.triage is not None else None,
            triage_why=clean(r.triage.why) if r.triage is not None else "",
            artifact=art, environment=dict(r.environment), memory_by_name=memory,
            stage_seconds=asdict(r.times), flipped=tuple(comp.flipped) if comp is not None else (),
            latency_path=r.latency_path or None, outputs_path=r.outputs_path or None,
            task=comp.task if comp is not None else "classification",
            **{k: num(m.get(k)) for k in TASK_METRICS},
            outputs=tuple(comp.outputs) if comp is not None else (),
            scored_output=comp.scored_output if comp is not None else "",
            label_agreement=num(comp.label_agreement) if comp is not None else None,
            task_metrics={k: num(v) for k, v in comp.task_metrics.items()} if comp is not None else {},
            agreement_uninformative=clean(comp.agreement_uninformative) if comp is not None else "",
        ))
    return rows
