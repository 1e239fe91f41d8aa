"""The tolerances' vocabulary: each metric a limit can be set on and the direction that is good (a task with
metrics of its own adds them, deploytool.tasks), a classifier's default limits per group, and why a pair of
limits cannot judge anything. Pure values (no files, no workspace): the judge reads them, and so do the manifest
reader and the CLI."""

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
# Each task's own (deploytool.tasks) replace these for a model that is not a classifier.

# A user's classifier (a model file: no manifest) is judged on its float routes by its error over each output's
# range, as the regression and raw tasks are, not by an absolute error: a deep network's logits reach tens, where
# float32 rounding alone differs by 3e-4 (the atlas' torchvision MobileNets came out "degraded" at 1e-4 absolute
# with every sample agreeing and cosine 1 - 1e-8). The zoo's manifests keep the absolute limits they write.
USER_CLASSIFIER_TOLERANCES = {
    "none": {"accuracy_drop_points": (0.0, 0.5), "agreement": (1.0, 0.99), "rel_error": (1e-4, 1e-2)},
    "quantized": dict(DEFAULT_TOLERANCES["quantized"]),
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
