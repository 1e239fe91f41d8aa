"""`Result`: one row of a run — (model, dataset, framework, format, quantize,
target, device/backend, runtime) -> status, comparison, provenance. A typed
value object; JSON exists only at the store and report boundary (`to_json` /
`from_json`, schema `SCHEMA_VERSION`, older rows upgraded on read). A failed
stage is a Result too. The row's value objects live here with it: `Combo`,
`Measurement`, and the `Comparison` against the PC baseline (its `Check`s and
`Flip`s; deploytool.run.compare computes it). A Comparison is truthy when its
verdict is "pass".
"""

from __future__ import annotations

import math
from dataclasses import asdict, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from deploytool.artifact import Artifact, Plan
from deploytool.errors import Frame, Raised
from deploytool.latency import PairedLatency, unpaired_sentence
from deploytool.tasks.base import Flip
from deploytool.tolerances import TOLERANCE_METRICS
from deploytool.value import value

SCHEMA_VERSION = 2

VERDICTS = ("pass", "degraded", "fail")
# Memory figures in order of preference when one number must stand for a run;
# each runtime names what it measured, and the ratio is only as honest as the
# pair: the report prints which two figures were divided.
MEMORY_PREFERENCE = (
    "isolated_peak_rss_delta_bytes",
    "process_peak_rss_delta_bytes",
    "renderer_peak_rss_bytes",
    "device_peak_rss_bytes",
    "peak_memory_footprint_bytes",
    "process_peak_rss_bytes",
)


# One sentence per figure, for the report's memory legend.
MEMORY_MEANING = {
    "isolated_peak_rss_delta_bytes": "peak resident memory of loading the model and running the whole test set, "
                                     "above the memory of the runtime's own process once its framework was imported "
                                     "and idle (the same alone or in a matrix; onnxruntime and LiteRT give Python no "
                                     "allocator statistics of their own, so there is none beside it).",
    "process_peak_rss_delta_bytes": "peak resident memory of loading and running the model above the memory just "
                                    "before, inside the long-lived deploytool process: it includes whatever that row "
                                    "was first to import, so it depends on the order of rows (rows measured before "
                                    "issue 10).",
    "process_peak_rss_bytes": "peak resident memory of the whole process that loaded and ran the model, framework "
                              "included.",
    "process_lifetime_peak_rss_bytes": "peak resident memory of the process over its whole life (the span's own "
                                       "peak could not be isolated on this system).",
    "renderer_peak_rss_bytes": "peak resident memory of the browser's renderer process that ran the page (a process "
                               "figure: page, JavaScript library, model and inputs).",
    "device_peak_rss_bytes": "peak resident memory of the process that ran the model on the phone.",
    "peak_memory_footprint_bytes": "the peak memory footprint the TFLite benchmark reported on the phone.",
}


@value
class Check:
    metric: str
    value: float
    pass_limit: float
    fail_limit: float
    outcome: str  # pass / degraded / fail

    def describe(self) -> str:
        return f"{self.metric} = {self.value:.6g} ({self.outcome}; {format_tolerance(self.metric, (self.pass_limit, self.fail_limit))})"


def format_tolerance(metric: str, limits: tuple[float, float]) -> str:
    """The one way a tolerance is written for a person: `pass if >= 0.99, fail below 0.97`."""
    pass_limit, fail_limit = limits
    if TOLERANCE_METRICS[metric] == "min":
        return f"pass if >= {pass_limit:g}, fail below {fail_limit:g}"
    return f"pass if <= {pass_limit:g}, fail above {fail_limit:g}"


@value
class OutputComparison:
    """One output of the model against the same output of the PC baseline. `rel_error` is the largest absolute
    error over the output's range (its largest |baseline value|); `cosine_*` are over the per-sample cosine
    similarities of the flattened output (two all-zero samples agree: 1; one all-zero against another: 0);
    for an output of one value per sample, the cosine of the whole column."""

    name: str
    shape: tuple[int, ...]  # one sample's
    max_abs_error: float
    mean_abs_error: float
    rel_error: float
    cosine_min: float
    cosine_mean: float
    exact_match: float | None = None  # an output of integers (labels): the share of samples equal to the baseline's


@value(frozen=False)
class Comparison:
    accuracy: float
    baseline_accuracy: float
    accuracy_delta_points: float  # target - baseline, in percentage points
    agreement: float
    flipped: list[Flip]
    max_abs_error: float
    mean_abs_error: float
    latency_ratio_p50: float | None
    latency_ratio_p90: float | None
    memory_ratio: float | None
    memory_figures: tuple[str, str] | None  # (target figure, baseline figure) that were divided
    size_ratio: float | None
    checks: list[Check] = field(default_factory=list)
    verdict: str = "pass"
    # classification (accuracy, agreement, flips on the first output), regression (MAE/RMSE against the labels)
    # or raw (no labels: agreement and error against the baseline's outputs only)
    task: str = "classification"
    outputs: list[OutputComparison] = field(default_factory=list)  # every output, in the model's order
    cosine_min: float | None = None  # the smallest over outputs (None: rows measured before outputs were compared)
    rel_error: float | None = None  # the largest over outputs
    top5_agreement: float | None = None  # classification with >= 10 classes: baseline's top-1 in target's top-5
    mae: float | None = None  # regression: against the labels
    rmse: float | None = None
    baseline_mae: float | None = None
    baseline_rmse: float | None = None
    mae_increase: float | None = None  # (target - baseline) / baseline: 0.05 is 5% worse
    rmse_increase: float | None = None
    # the 95% bootstrap interval of latency_ratio_p50 when it was measured paired (deploytool.latency); None: the
    # ratio of the row's p50 to the baseline's, each timed in its own process
    latency_ratio_ci: tuple[float, float] | None = None
    scored_output: str = ""  # the output accuracy, agreement and flips are of ("" : the only one)
    label_agreement: float | None = None  # the smallest exact_match over integer (label) outputs
    # the metrics of a task that has its own (deploytool.tasks: a task registered beside the built-in ones)
    task_metrics: dict[str, float | None] = field(default_factory=dict)
    # why agreement with this baseline says nothing (deploytool.tasks.weak_set): the row was then judged on output
    # error and cosine instead of agreement and accuracy ("": judged as its task asks)
    agreement_uninformative: str = ""

    def __bool__(self) -> bool:
        return self.verdict == "pass"

    @property
    def broken(self) -> list[Check]:
        return [c for c in self.checks if c.outcome != "pass"]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def primary_memory(memory_bytes: dict[str, float]) -> tuple[str, float] | None:
    for key in MEMORY_PREFERENCE:
        if memory_bytes.get(key) is not None:
            return key, float(memory_bytes[key])
    return None


class Status(str, Enum):
    """What became of a combination. "measured" means a Comparison exists; every other status carries a reason.
    Final: measuring again would give the same answer (a re-run of the same request reuses the row); the others
    (a phone unplugged, a time-out, a crash while running) are tried again. `load_failed` is a model the runtime
    refuses to load (unreadable, an op it lacks): deterministic, so final. Failing: the run's exit code is 1."""
    MEASURED = "measured"
    CONVERSION_FAILED = "conversion_failed"
    UNSUPPORTED = "unsupported"
    NOT_APPLICABLE = "not_applicable"
    DELEGATE_REFUSED = "delegate_refused"
    WRONG_ABI = "wrong_abi"
    LOAD_FAILED = "load_failed"
    RUNTIME_FAILED = "runtime_failed"
    TIMEOUT = "timeout"
    DEVICE_LOST = "device_lost"
    WORKER_LOST = "worker_lost"  # the lab worker running the cell died (after one retry)
    NO_WORKER = "no_worker"  # no lab worker has the resource the cell needs (after a bounded wait)
    ERROR = "error"

    @property
    def final(self) -> bool:
        return self in _FINAL

    @property
    def failing(self) -> bool:
        return self in _FAILING

    def __str__(self) -> str:
        return self.value


_FINAL = frozenset({Status.MEASURED, Status.CONVERSION_FAILED, Status.UNSUPPORTED, Status.NOT_APPLICABLE,
                    Status.DELEGATE_REFUSED, Status.WRONG_ABI, Status.LOAD_FAILED})
_FAILING = frozenset({Status.CONVERSION_FAILED, Status.LOAD_FAILED, Status.RUNTIME_FAILED, Status.TIMEOUT,
                      Status.DEVICE_LOST, Status.WRONG_ABI, Status.WORKER_LOST, Status.NO_WORKER, Status.ERROR})
FINAL_STATUSES = tuple(s.value for s in Status if s.final)
FAILING_STATUSES = tuple(s.value for s in Status if s.failing)


class Verdict(str, Enum):
    """A measured row against its tolerances (deploytool.run.compare decides; this names the outcomes)."""

    PASS = "pass"
    DEGRADED = "degraded"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return ("pass", "degraded", "fail").index(self.value)

    def __str__(self) -> str:
        return self.value


@value
class Combo:
    framework: str
    format: str
    quantize: str
    target: str
    device: str = ""  # android serial, or "" elsewhere
    backend: str = ""  # web backend (wasm/cpu/webgl), android delegate, or ""
    runtime: str = ""  # the runtime chosen among several for (target, format); "" = the target's default

    @property
    def where(self) -> str:
        """Where the row ran, e.g. `web:wasm`, `android:xnnpack@emulator-5554`, `host[tensorflow-lite]`."""
        return (self.target + (f":{self.backend}" if self.backend else "") + (f"@{self.device}" if self.device else "")
                + (f"[{self.runtime}]" if self.runtime else ""))

    @property
    def label(self) -> str:
        return f"{self.framework}->{self.format}/{self.quantize} on {self.where}"

    @property
    def quantized(self) -> bool:
        return self.quantize != "none"


@value
class Measurement:
    """What a runtime measured besides the outputs: batch-1 latency, memory, load and throughput."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    latency_samples: int
    memory_bytes: dict[str, float] = field(default_factory=dict)  # each name says what was measured
    load_ms: float | None = None
    first_inference_ms: float | None = None
    throughput_sps: float | None = None
    # K: batch-1 inferences per timer reading (the p50/p90/p99 are of means of K when > 1)
    latency_inferences_per_reading: int = 1
    # the row's latency timed against the PC baseline's in alternating blocks (None: timed alone; issue 25)
    paired: PairedLatency | None = None
    not_paired: str = ""  # why the latency was timed alone ("" : paired, or a row measured before it was said)
    is_baselines: bool = False  # the latency is the PC baseline's own (the row runs the baseline's very file)

    @property
    def memory(self) -> tuple[str, float] | None:
        return primary_memory(self.memory_bytes)


@value(frozen=False)
class LabPlace:
    """Where a lab night measured a row: its cell, the cell's label in the lab file, the host and Dask worker."""

    cell: str = ""
    label: str = ""
    host: str = ""
    worker: str = ""


# Keys older rows kept in Result.environment for what are typed fields now (LabPlace, Measurement).
_LAB_KEYS = {"lab_cell": "cell", "lab_label": "label", "lab_host": "host", "lab_worker": "worker"}
_MEASUREMENT_KEYS = {"latency_not_paired": "not_paired", "latency_is_baselines": "is_baselines"}


@value(frozen=False)
class StageTimes:
    """Wall seconds of each stage of one combination."""

    convert: float = 0.0
    runtime: float = 0.0
    compare: float = 0.0
    store: float = 0.0


# The classes a failing row is triaged into (deploytool.bugs.triage has the rules).
TRIAGE_CLASSES = ("internal_error", "unsupported", "environment", "upstream", "expected")


@value
class Triage:
    """The one class of a failing row and its evidence (deploytool.bugs.triage decides): `raised_at` is the
    frame where the exception was raised (past the standard library), `ops` and `remedy` a coverage gap's,
    `mismatches` the requirements an involved package's pins declare and the installation does not meet,
    `packages` the distributions involved with their versions."""

    klass: str  # one of TRIAGE_CLASSES
    why: str
    raised_at: Frame | None = None
    ops: tuple[str, ...] = ()
    remedy: str = ""
    mismatches: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    @property
    def upstream(self) -> bool:
        return self.klass == "upstream"

    def describe(self) -> str:
        """`unsupported: no conversion or kernel for TreeEnsembleClassifier: ...`."""
        return f"{self.klass}: {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {"class": self.klass, "why": self.why,
                "raised_at": self.raised_at.to_json() if self.raised_at else None, "ops": list(self.ops),
                "remedy": self.remedy, "mismatches": list(self.mismatches), "packages": list(self.packages)}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Triage | None":
        if not d or d.get("class") not in TRIAGE_CLASSES:
            return None
        at = d.get("raised_at")
        return cls(str(d["class"]), str(d.get("why") or ""), Frame.from_json(at) if at else None,
                   tuple(d.get("ops") or ()), str(d.get("remedy") or ""), tuple(d.get("mismatches") or ()),
                   tuple(d.get("packages") or ()))


@value(frozen=False)
class Result:
    run_id: str
    combo_key: str
    model: str
    dataset: str
    combo: Combo
    status: Status
    reason: str = ""
    comparison: Comparison | None = None  # set exactly when status is measured
    measurement: Measurement | None = None
    artifact: Artifact | None = None  # the converted model (also set when running it failed)
    environment: dict[str, Any] = field(default_factory=dict)  # what the runtime said of itself
    times: StageTimes = field(default_factory=StageTimes)
    plan: Plan | None = None  # the conversion route (stored as {} when there is none)
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    baseline_framework: str = ""
    outputs_path: str = ""  # (N, C) float32 .npy
    latency_path: str = ""  # per-sample batch-1 latencies, .npy
    bundle: str = ""  # the bug bundle folder of a failing row
    bundle_error: str = ""
    traceback: str = ""
    created_at: str = ""
    raised: Raised | None = None  # the exception a failing row stands for, with its frames (for triage)
    triage: Triage | None = None  # a failing row's class (deploytool.bugs.triage)
    # (name, one sample's shape) of each output stored side by side in outputs_path; None: one output
    output_layout: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    lab: LabPlace = field(default_factory=LabPlace)  # where a lab night measured it (deploytool.lab; empty: not one)

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    # -- one rule each -------------------------------------------------------
    @property
    def verdict(self) -> Verdict | None:
        return Verdict(self.comparison.verdict) if self.comparison is not None else None

    @property
    def failing(self) -> bool:
        return self.status.failing or self.verdict is Verdict.FAIL

    @property
    def label(self) -> str:
        return self.combo.label

    @property
    def latency_how(self) -> str:
        """One sentence: how the row's latency was measured and how steady the machine was ("" unmeasured)."""
        m = self.measurement
        if m is None:
            return ""
        if m.paired is not None:
            return m.paired.describe()
        why = m.not_paired or "measured before rows were timed against the baseline"
        if m.is_baselines:
            return why
        return unpaired_sentence(self.combo.where, why, m.latency_inferences_per_reading)

    @property
    def outcome(self) -> str:
        """The verdict of a measured row, else its status."""
        return str(self.verdict) if self.verdict is not None else str(self.status)

    @property
    def metrics(self) -> dict[str, float | int | None]:
        """The flat numbers of the row (the store's columns, the report's table)."""
        c, m, a = self.comparison, self.measurement, self.artifact
        out: dict[str, float | int | None] = {}
        if c is not None:
            out.update(accuracy=c.accuracy, baseline_accuracy=c.baseline_accuracy,
                       accuracy_delta_points=c.accuracy_delta_points, agreement=c.agreement,
                       flipped_count=len(c.flipped), max_abs_error=c.max_abs_error, mean_abs_error=c.mean_abs_error,
                       latency_ratio_p50=c.latency_ratio_p50, latency_ratio_p90=c.latency_ratio_p90,
                       memory_ratio=c.memory_ratio, size_ratio=c.size_ratio)
            if c.outputs:  # rows measured since every output is compared (issue 24)
                out.update(cosine_min=c.cosine_min, rel_error=c.rel_error, top5_agreement=c.top5_agreement,
                           mae=c.mae, rmse=c.rmse, baseline_rmse=c.baseline_rmse, rmse_increase=c.rmse_increase,
                           mae_increase=c.mae_increase)
            out.update(c.task_metrics)
        if m is not None:
            mem = m.memory
            out.update(p50_ms=m.p50_ms, p90_ms=m.p90_ms, p99_ms=m.p99_ms, mean_ms=m.mean_ms,
                       latency_samples=m.latency_samples, memory_bytes=mem[1] if mem else None,
                       load_ms=m.load_ms, first_inference_ms=m.first_inference_ms, throughput_sps=m.throughput_sps)
        if a is not None and c is not None:
            out["size_bytes"] = a.size_bytes
        return {k: _number(v) for k, v in out.items()}

    # -- the JSON boundary ---------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": SCHEMA_VERSION}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "status":
                v = v.value
            elif f.name == "artifact":
                v = v.to_json() if v is not None else None
            elif f.name == "plan":
                v = v.to_json() if v is not None else {}
            elif f.name == "tolerances":
                v = {k: list(lim) for k, lim in v.items()}
            elif f.name in ("combo", "comparison", "measurement", "times", "lab"):  # (lab is never None)
                v = asdict(v) if v is not None else None
            elif f.name in ("raised", "triage"):
                v = v.to_json() if v is not None else None
            d[f.name] = v
        return _finite(d)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Result":
        d = dict(d)
        if int(d.pop("schema", 1) or 1) < 2:
            d = _upgrade_v1(d)
        d = _typed_environment(d)
        d["combo"] = Combo(**d["combo"])
        d["comparison"] = comparison_from_json(d.get("comparison"))
        if d.get("measurement"):
            m = dict(d["measurement"])
            m["paired"] = PairedLatency.from_json(m.get("paired"))
            d["measurement"] = Measurement(**m)
        else:
            d["measurement"] = None
        d["artifact"] = Artifact.from_json(d["artifact"]) if d.get("artifact") else None
        d["plan"] = Plan.from_json(d["plan"]) if d.get("plan") else None
        d["times"] = StageTimes(**(d.get("times") or {}))
        d["lab"] = LabPlace(**(d.get("lab") or {}))
        d["raised"] = Raised.from_json(d.get("raised"))
        d["triage"] = Triage.from_json(d.get("triage"))
        d["tolerances"] = {k: (float(v[0]), float(v[1])) for k, v in (d.get("tolerances") or {}).items()}
        if d.get("output_layout") is not None:
            d["output_layout"] = tuple((str(n), tuple(int(x) for x in s)) for n, s in d["output_layout"])
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _typed_environment(d: dict[str, Any]) -> dict[str, Any]:
    """A row stored when deploytool's own facts rode in `environment` (lab_cell, latency_not_paired, ...): those
    keys become the typed fields they are now; the runtime's own facts stay."""
    env = dict(d.get("environment") or {})
    if not any(k in env for k in (*_LAB_KEYS, *_MEASUREMENT_KEYS)):
        return d
    d = {**d, "environment": {k: v for k, v in env.items() if k not in _LAB_KEYS and k not in _MEASUREMENT_KEYS}}
    lab = {f: str(env[k]) for k, f in _LAB_KEYS.items() if k in env}
    if lab and not d.get("lab"):
        d["lab"] = lab
    if d.get("measurement"):
        d["measurement"] = {**d["measurement"], **{f: env[k] for k, f in _MEASUREMENT_KEYS.items() if k in env}}
    return d


def comparison_from_json(d: dict[str, Any] | None) -> Comparison | None:
    if not d:
        return None
    d = {k: _nan_if_none(v) if k in _FLOAT_FIELDS else (_float_or_none(v) if k in _RATIO_FIELDS else v)
         for k, v in d.items()}
    d["flipped"] = [Flip(**f) for f in d.get("flipped") or []]
    d["checks"] = [Check(**c) for c in d.get("checks") or []]
    d["outputs"] = [OutputComparison(**{**o, "shape": tuple(o.get("shape") or ())}) for o in d.get("outputs") or []]
    if d.get("memory_figures") is not None:
        d["memory_figures"] = tuple(d["memory_figures"])
    if d.get("latency_ratio_ci") is not None:
        d["latency_ratio_ci"] = tuple(_nan_if_none(v) for v in d["latency_ratio_ci"])
    return Comparison(**d)


_FLOAT_FIELDS = ("accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "max_abs_error",
                 "mean_abs_error")
_RATIO_FIELDS = ("latency_ratio_p50", "latency_ratio_p90", "memory_ratio", "size_ratio", "cosine_min", "rel_error",
                 "top5_agreement", "mae", "rmse", "baseline_mae", "baseline_rmse", "mae_increase", "rmse_increase")


def _float_or_none(v: Any) -> Any:
    return None if v is None else _nan_if_none(v)


def _number(v: Any) -> float | int | None:
    """A metric: a finite number, or None where it could not be computed (NaN, inf)."""
    if v is None or isinstance(v, bool):
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _nan_if_none(v: Any) -> Any:
    """A float of a stored comparison: null (or a string an older version wrote, "nan"/"inf") -> a float."""
    if v is None:
        return float("nan")
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return float("nan")
    return v


def _finite(obj: Any) -> Any:
    """JSON has no NaN/inf: they travel as null (numbers that could not be computed)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, Enum):
        return obj.value
    return obj


def _upgrade_v1(d: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 row (flat `metrics` and a `details` bag) as a schema-2 dict."""
    details = dict(d.pop("details", None) or {})
    metrics = dict(d.pop("metrics", None) or details.pop("metrics", None) or {})
    d.pop("verdict", None)  # schema 2 derives it from the comparison
    d["comparison"] = details.get("comparison")
    if metrics.get("p50_ms") is not None:
        d["measurement"] = {"p50_ms": metrics.get("p50_ms"), "p90_ms": metrics.get("p90_ms"),
                            "p99_ms": metrics.get("p99_ms"), "mean_ms": metrics.get("mean_ms"),
                            "latency_samples": int(metrics.get("latency_samples") or 0),
                            "memory_bytes": details.get("memory_bytes") or {}, "load_ms": metrics.get("load_ms"),
                            "first_inference_ms": metrics.get("first_inference_ms"),
                            "throughput_sps": metrics.get("throughput_sps")}
    d["artifact"] = details.get("artifact")
    d["environment"] = details.get("environment") or {}
    stage = details.get("stage_seconds") or {}
    d["times"] = {k: float(stage.get(k) or 0.0) for k in ("convert", "runtime", "compare", "store")}
    d["plan"] = details.get("plan") or {}
    d["tolerances"] = details.get("tolerances") or {}
    d["notes"] = list(details.get("notes") or [])
    d["baseline_framework"] = details.get("baseline_framework", "")
    d["latency_path"] = details.get("latency_samples_path", "")
    d["bundle"] = details.get("bundle", "")
    d["bundle_error"] = details.get("bundle_error", "")
    d["traceback"] = details.get("traceback", "")
    if d.get("status") == "device_error":  # a v1 word that nothing produced
        d["status"] = "error"
    return d
