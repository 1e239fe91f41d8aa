"""Classification: one score per class on the scored output. Judged by accuracy against integer labels (when the
test set has them), top-1 agreement with the PC baseline, the flipped samples and, from 10 classes, top-5
agreement. Inferred from integer labels, or without labels from an output of one score per class."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from deploytool.errors import DataError
from deploytool.tasks.base import Column, Flip, Scores, Task, TaskView
from deploytool.tasks.weak_set import agreement_uninformative
from deploytool.tolerances import USER_CLASSIFIER_TOLERANCES

ACCURACY = Column("accuracy", "accuracy", "pct", title="top-1 accuracy against the test set's labels", percent=True)
DELTA_PTS = Column("Δ pts", "accuracy_delta_points", "points", "low",
                   "accuracy change against the PC baseline in percentage points")
AGREE = Column("agree", "agreement", "pct", title="top-1 agreement with the PC baseline", percent=True)
FLIPS = Column("flips", "flipped_count", "count", title="samples whose top-1 class differs from the PC baseline's")
MAX_ERR = Column("max err", "max_abs_error", "float", title="largest |output − PC baseline's output|")
COS_MIN = Column("cos min", "cosine_min", "cosine", title="smallest per-sample cosine with the PC baseline's outputs")


def top_k_agreement(target: np.ndarray, reference: np.ndarray, k: int = 5) -> float:
    """Share of samples whose reference top-1 class is among the target's top k."""
    t = np.asarray(target).reshape(len(target), -1)
    best = np.asarray(reference).reshape(len(reference), -1).argmax(1)
    top = np.argpartition(-t, kth=min(k, t.shape[1]) - 1, axis=1)[:, :k]
    return float(np.mean((top == best[:, None]).any(1)))


class Classification(Task):
    name = "classification"
    tolerances = USER_CLASSIFIER_TOLERANCES
    label_metrics = ("accuracy_drop_points",)
    view = TaskView(
        "classification", (ACCURACY, DELTA_PTS, AGREE, FLIPS, MAX_ERR),
        (replace(ACCURACY, head="acc"), DELTA_PTS, AGREE, FLIPS), DELTA_PTS,
        ACCURACY, "accuracy (%)", "accuracy", "{classes} classes",
        sections=frozenset({"confusion", "gallery"}))
    # a classifier's test set without labels: no accuracy, so the rows are read by agreement with the baseline;
    # its flips have no true class, so there is no confusion difference (rows = true class) to draw
    unlabelled_view = TaskView(
        "classification", (AGREE, FLIPS, COS_MIN, MAX_ERR), (AGREE, FLIPS, COS_MIN), AGREE,
        AGREE, "top-1 agreement with the PC baseline (%)", "", "no labels · {classes} classes",
        sections=frozenset({"gallery"}))

    def claims(self, y: np.ndarray | None, scored_shape: tuple[int, ...]) -> bool:
        if y is not None and len(y):
            return bool(np.issubdtype(np.asarray(y).dtype, np.integer))
        return len(scored_shape) == 1 and scored_shape[0] >= 2

    def check_labels(self, y: np.ndarray, values: int, where: str) -> None:
        if len(y) and y.dtype.kind in "iu" and y.ndim != 1:
            raise DataError(f"{where}: y holds integers of shape {list(y.shape)}: a classifier's labels are one class "
                            "index per sample (N,); store float targets for a regressor")
        if len(y) and y.dtype.kind == "f":
            raise DataError(f"{where}: --task classification, but y holds floats (regression targets); store integer "
                            "class indices, or use --task regression")
        if values < 2:
            raise DataError(f"{where}: --task classification, but the scored output holds {values} value per sample; "
                            "a classifier gives one score per class (use --task regression or raw, or --output)")

    def uninformative(self, baseline: np.ndarray) -> str:
        return agreement_uninformative(baseline)

    def score(self, target: np.ndarray, baseline: np.ndarray, y: np.ndarray | None) -> Scores:
        target, baseline = target.reshape(len(target), -1), baseline.reshape(len(baseline), -1)
        pred, base_pred = target.argmax(1), baseline.argmax(1)
        labels = np.asarray(y) if y is not None else np.full(len(target), -1)
        fields: dict[str, float] = {"agreement": float(np.mean(pred == base_pred))}
        if y is not None:
            acc, base_acc = float(np.mean(pred == labels)), float(np.mean(base_pred == labels))
            fields.update(accuracy=acc, baseline_accuracy=base_acc, accuracy_delta_points=100.0 * (acc - base_acc))
        if target.shape[1] >= 10:
            fields["top5_agreement"] = top_k_agreement(target, baseline, 5)
        flips = tuple(Flip(int(i), int(labels[i]), int(base_pred[i]), int(pred[i]))
                      for i in np.flatnonzero(pred != base_pred))
        return Scores(fields=fields, flipped=flips)


__all__ = ["Classification", "top_k_agreement"]
