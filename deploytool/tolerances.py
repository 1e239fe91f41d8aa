"""The tolerances' vocabulary: each metric a limit can be set on and the direction that is good, the default
limits per task and group, and why a pair of limits cannot judge anything. Pure values (no files, no workspace):
the judge reads them, and so do the manifest reader and the CLI."""

from __future__ import annotations

import math

# Tolerance metrics and the direction that is good: each limit is a pair
# [pass_limit, fail_limit]; a value between the two is "degraded".
TOLERANCE_METRICS = {
    "accuracy_drop_points": "max",  # baseline accuracy - target accuracy, in points
    "agreement": "min",  # share of samples whose top-1 equals the baseline's
    "max_abs_error": "max",  # largest |output - baseline output|, over every output
    "top5_agreement": "min",  # share of samples whose baseline top-1 is among the target's top 5 (>= 10 classes)
    "cosine_min": "min",  # smallest per-sample cosine similarity to the baseline's output, over every output
    "rel_error": "max",  # largest |output - baseline output| over the output's range, over every output
    "mae_increase": "max",  # regression: (target MAE - baseline MAE) / baseline MAE against the labels
    "rmse_increase": "max",  # regression: the same for the RMSE
    "label_agreement": "min",  # share of samples whose integer (label) outputs equal the baseline's exactly
}
TOLERANCE_GROUPS = ("none", "quantized")


DEFAULT_TOLERANCES = {
    "none": {"accuracy_drop_points": (0.0, 0.5), "agreement": (1.0, 0.99), "max_abs_error": (1e-4, 1e-2)},
    "quantized": {"accuracy_drop_points": (1.0, 3.0), "agreement": (0.98, 0.95)},
}
# By task: a classifier as above; a regressor by its error against the labels and the baseline's outputs
# (relative: its outputs have any scale); raw outputs (no labels) by their likeness to the baseline's.
TASK_TOLERANCES = {
    "classification": DEFAULT_TOLERANCES,
    "regression": {"none": {"rmse_increase": (0.001, 0.01), "rel_error": (1e-4, 1e-2)},
                   "quantized": {"rmse_increase": (0.05, 0.20), "rel_error": (0.05, 0.25)}},
    "raw": {"none": {"rel_error": (1e-4, 1e-2), "cosine_min": (0.9999, 0.999)},
            "quantized": {"cosine_min": (0.99, 0.95), "rel_error": (0.05, 0.20)}},
}


def source_tolerances(tolerances: dict[str, dict[str, tuple[float, float]]],
                      quantized_source: bool) -> dict[str, dict[str, tuple[float, float]]]:
    """A source's default tolerances by group (copies). A source that is itself quantized (a fully int8 file: its
    I/O tensors are integers with a scale) is judged by the quantized group's limits on every row, `--quantize
    none` included: kernels round its integer arithmetic differently (LiteRT's XNNPACK and TFLite's built-in
    kernels give outputs one quantization step apart), which the float limits would call a failure."""
    if quantized_source:
        return {g: dict(tolerances["quantized"]) for g in TOLERANCE_GROUPS}
    return {g: dict(v) for g, v in tolerances.items()}


# Metrics that are shares of samples or cosines (at most 1), and the ones that cannot be negative: a limit outside
# what the metric can be makes even a bit-identical copy fail (or nothing ever fail).
FRACTION_METRICS = ("agreement", "top5_agreement", "label_agreement")
COSINE_METRICS = ("cosine_min",)
NON_NEGATIVE_METRICS = ("max_abs_error", "rel_error")


def tolerance_problem(metric: str, limits: tuple[float, ...]) -> str | None:
    """Why a [pass, fail] pair cannot judge anything, or None when it can."""
    if len(limits) != 2 or not all(math.isfinite(v) for v in limits):
        return f"must be two finite numbers [pass, fail], got {list(limits)}"
    pass_limit, fail_limit = limits
    low, high = {**dict.fromkeys(FRACTION_METRICS, (0.0, 1.0)), **dict.fromkeys(COSINE_METRICS, (-1.0, 1.0)),
                 **dict.fromkeys(NON_NEGATIVE_METRICS, (0.0, math.inf))}.get(metric, (-math.inf, math.inf))
    if not all(low <= v <= high for v in limits):
        span = f"{low:g}..{high:g}" if math.isfinite(high) else f">= {low:g}"
        return f"must lie in {span} ({metric} can be nothing else), got {list(limits)}"
    if TOLERANCE_METRICS[metric] == "min" and pass_limit < fail_limit:
        return (f"is inverted: {metric} passes at >= {pass_limit:g} and fails below {fail_limit:g}, "
                f"so the pass limit must be the larger one")
    if TOLERANCE_METRICS[metric] == "max" and pass_limit > fail_limit:
        return (f"is inverted: {metric} passes at <= {pass_limit:g} and fails beyond {fail_limit:g}, "
                f"so the pass limit must be the smaller one")
    return None


# What a classifier's row is judged by when its test set is weak (deploytool.run.weak_set: agreement with the
# baseline says nothing): its limits less the ones agreement and accuracy stand behind, plus output error and cosine.
AGREEMENT_METRICS = ("agreement", "top5_agreement", "label_agreement", "accuracy_drop_points")
WEAK_SET_METRICS = ("cosine_min", "rel_error")


def weak_set_tolerances(tolerances: dict[str, tuple[float, float]],
                        quantized: bool) -> dict[str, tuple[float, float]]:
    """The row's `tolerances` without the agreement family, with cosine_min and rel_error at the row's own limits
    when it has them (a manifest's or --tolerance's), else the raw task's for the row's group (`quantized`)."""
    raw = TASK_TOLERANCES["raw"]["quantized" if quantized else "none"]
    kept = {m: lim for m, lim in tolerances.items() if m not in AGREEMENT_METRICS}
    return {**kept, **{m: tolerances.get(m, raw[m]) for m in WEAK_SET_METRICS}}
