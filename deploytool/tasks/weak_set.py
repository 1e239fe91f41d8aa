"""A weak test set, named (issue 38, part 4): when the PC baseline gives (nearly) every test sample the same top-1
class, or its outputs barely differ from one sample to the next, top-1 agreement with it says nothing — a target that
answers that one class whatever it is given agrees with it, and near-equal scores let rounding alone reorder the top
class. Such a row is judged on output error and cosine instead. Pure: the baseline's scores in, one sentence out; it
never reads a file or judges a row (the classifier's task names it, deploytool.run.compare applies it).

The rule and why its numbers are what they are (tests/unit/test_weak_set.py pins them):
- ONE_CLASS_SHARE = 0.95: the baseline's most frequent top-1 class covers at least this share of the samples. A
  target that answers that class for every input scores agreement >= the share, and 0.95 is the lowest fail limit
  of agreement (deploytool.tolerances, quantized rows): from there on such a target cannot fail on agreement.
- MIN_SAMPLES = 20: fewer samples are not judged weak. An honest two-class model on a balanced set gives >= 95% one
  class by chance with probability 2 * 21 / 2**20 = 4e-5 at 20 samples, but 2e-3 at 10.
- SPREAD_FLOOR = 0.01: the samples' outputs differ from their mean by under 1% of their size (the root mean square
  of |x_i - mean| over that of |x_i|). int8 rounds a tensor to 256 steps of its range (0.4% each): outputs that
  differ by about two steps have their top-1 decided by rounding, not by the model.
"""

from __future__ import annotations

import numpy as np

from deploytool.tasks.raw import Raw

ONE_CLASS_SHARE = 0.95
MIN_SAMPLES = 20
SPREAD_FLOOR = 0.01


def spread_across_samples(outputs: np.ndarray) -> float:
    """How much the samples' outputs differ from their mean, relative to their size: sqrt(mean |x_i - x̄|²) /
    sqrt(mean |x_i|²), 0 for identical samples (and for all-zero ones), NaN when a value is not finite."""
    x = np.asarray(outputs, np.float64).reshape(len(outputs), -1)
    if not np.isfinite(x).all():
        return float("nan")
    size = float(np.sqrt(np.mean(np.sum(x * x, axis=1))))
    if size == 0.0:
        return 0.0
    d = x - x.mean(axis=0)
    return float(np.sqrt(np.mean(np.sum(d * d, axis=1)))) / size


def agreement_uninformative(scores: np.ndarray) -> str:
    """Why top-1 agreement with a baseline that gave these class scores (N samples, C >= 2 classes) says nothing,
    in one sentence; "" when it does (or when there are too few samples or classes to say)."""
    x = np.asarray(scores, np.float64).reshape(len(scores), -1)
    n, classes = x.shape
    if n < MIN_SAMPLES or classes < 2 or not np.isfinite(x).all():
        return ""
    counts = np.bincount(x.argmax(axis=1), minlength=classes)
    top = int(counts.argmax())
    share = float(counts[top]) / n
    if share >= ONE_CLASS_SHARE:
        return (f"the PC baseline predicts class {top} for {int(counts[top])} of {n} test samples "
                f"({100 * share:.0f}%; the rule: >= {100 * ONE_CLASS_SHARE:.0f}%)")
    spread = spread_across_samples(x)
    if spread < SPREAD_FLOOR:
        return (f"the PC baseline's outputs differ across the {n} test samples by {100 * spread:.2g}% of their "
                f"size (the rule: under {100 * SPREAD_FLOOR:g}%)")
    return ""


# What a row's note adds to the reason: why agreement says nothing, and what the row was judged on instead.
JUDGED_INSTEAD = ("a target answering one class whatever it is given would agree as well, and near-equal scores let "
                  "rounding alone reorder the top class, so agreement and accuracy say nothing; judged on output "
                  "error and cosine instead (a model with random weights, or a test set of one class, gives such a "
                  "baseline; when outputs barely vary, the output error is what tells)")


# What a classifier's row is judged by when its test set is weak (agreement with the baseline says nothing): its limits less the ones agreement and accuracy stand behind, plus output error and cosine.
AGREEMENT_METRICS = ("agreement", "top5_agreement", "label_agreement", "accuracy_drop_points")
WEAK_SET_METRICS = ("cosine_min", "rel_error")


def weak_set_tolerances(tolerances: dict[str, tuple[float, float]],
                        quantized: bool) -> dict[str, tuple[float, float]]:
    """The row's `tolerances` without the agreement family, with cosine_min and rel_error at the row's own limits
    when it has them (a manifest's or --tolerance's), else the raw task's for the row's group (`quantized`)."""
    raw = Raw.tolerances["quantized" if quantized else "none"]
    kept = {m: lim for m, lim in tolerances.items() if m not in AGREEMENT_METRICS}
    return {**kept, **{m: tolerances.get(m, raw[m]) for m in WEAK_SET_METRICS}}
