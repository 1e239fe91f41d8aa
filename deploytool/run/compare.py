"""Compare a target's outputs against the PC baseline of the same model and
data — accuracy and its delta, top-1 agreement, the flipped samples, output
error, latency / memory / size ratios — and judge them against the manifest's
tolerances, giving a `Comparison` (deploytool.result). Stateless functions over
value objects; it never runs a model.
"""

from __future__ import annotations

import numpy as np

from deploytool.errors import UnknownOption
from deploytool.result import MEMORY_PREFERENCE, Check, Comparison, Flip
from deploytool.spec import TOLERANCE_METRICS, tolerance_problem


def judge(metric: str, value: float, limits: tuple[float, float]) -> Check:
    pass_limit, fail_limit = limits
    if TOLERANCE_METRICS[metric] == "min":
        outcome = "pass" if value >= pass_limit else ("degraded" if value >= fail_limit else "fail")
    else:
        outcome = "pass" if value <= pass_limit else ("degraded" if value <= fail_limit else "fail")
    return Check(metric, float(value), float(pass_limit), float(fail_limit), outcome)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b <= 0:
        return None
    return float(a) / float(b)


def memory_pair(target: dict[str, float], baseline: dict[str, float]) -> str | None:
    """The first figure both sides measured the same way; a ratio of unlike figures is no ratio."""
    for key in MEMORY_PREFERENCE:
        if target.get(key) is not None and baseline.get(key):
            return key
    return None


def compare(outputs: np.ndarray, baseline_outputs: np.ndarray, y_true: np.ndarray,
            tolerances: dict[str, tuple[float, float]], *,
            latency_p50_ms: float | None = None, latency_p90_ms: float | None = None,
            baseline_p50_ms: float | None = None, baseline_p90_ms: float | None = None,
            memory_bytes: dict[str, float] | None = None, baseline_memory_bytes: dict[str, float] | None = None,
            size_bytes: int | None = None, baseline_size_bytes: int | None = None) -> Comparison:
    outputs = np.asarray(outputs, np.float32).reshape(len(y_true), -1)
    base = np.asarray(baseline_outputs, np.float32).reshape(len(y_true), -1)
    if outputs.shape != base.shape:
        raise ValueError(f"outputs {outputs.shape} and baseline {base.shape} differ in shape")
    pred, base_pred = outputs.argmax(1), base.argmax(1)
    acc, base_acc = float(np.mean(pred == y_true)), float(np.mean(base_pred == y_true))
    flipped_idx = np.flatnonzero(pred != base_pred)
    err = np.abs(outputs.astype(np.float64) - base)
    finite = np.isfinite(err)
    max_err = float(err.max()) if finite.all() else float("inf")
    mean_err = float(err[finite].mean()) if finite.any() else float("inf")
    mem_key = memory_pair(memory_bytes or {}, baseline_memory_bytes or {})
    c = Comparison(
        accuracy=acc, baseline_accuracy=base_acc, accuracy_delta_points=100.0 * (acc - base_acc),
        agreement=float(np.mean(pred == base_pred)),
        flipped=[Flip(int(i), int(y_true[i]), int(base_pred[i]), int(pred[i])) for i in flipped_idx],
        max_abs_error=max_err, mean_abs_error=mean_err,
        latency_ratio_p50=_ratio(latency_p50_ms, baseline_p50_ms),
        latency_ratio_p90=_ratio(latency_p90_ms, baseline_p90_ms),
        memory_ratio=_ratio(memory_bytes[mem_key], baseline_memory_bytes[mem_key]) if mem_key else None,
        memory_figures=(mem_key, mem_key) if mem_key else None,
        size_ratio=_ratio(size_bytes, baseline_size_bytes),
    )
    values = {"accuracy_drop_points": -c.accuracy_delta_points, "agreement": c.agreement,
              "max_abs_error": c.max_abs_error}
    c.checks = [judge(m, values[m], lim) for m, lim in tolerances.items()]
    outcomes = {ch.outcome for ch in c.checks}
    c.verdict = "fail" if "fail" in outcomes else ("degraded" if "degraded" in outcomes else "pass")
    return c


def parse_tolerance_overrides(items: list[str]) -> dict[str, tuple[float, float]]:
    """`--tolerance agreement=0.99,0.97` -> {"agreement": (0.99, 0.97)}; one value sets both limits."""

    out: dict[str, tuple[float, float]] = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in TOLERANCE_METRICS or not value:
            raise UnknownOption(f"--tolerance {item!r}: expected METRIC=PASS[,FAIL] with METRIC one of "
                                f"{', '.join(TOLERANCE_METRICS)}")
        try:
            nums = [float(v) for v in value.split(",")]
        except ValueError:
            raise UnknownOption(f"--tolerance {item!r}: limits must be numbers") from None
        if len(nums) not in (1, 2):
            raise UnknownOption(f"--tolerance {item!r}: give one or two limits")
        problem = tolerance_problem(name, (nums[0], nums[-1]))
        if problem:
            raise UnknownOption(f"--tolerance {item!r}: {problem}")
        out[name] = (nums[0], nums[-1])
    return out
