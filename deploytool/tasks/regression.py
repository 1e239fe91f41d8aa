"""Regression: float targets per sample. Judged by the RMSE (and MAE) against the labels and how much it grew
over the PC baseline's, and by the outputs' error over their range (a regressor's outputs have any scale).
Inferred from float labels."""

from __future__ import annotations

import numpy as np

from deploytool.errors import DataError
from deploytool.tasks.base import Column, Scores, Task, TaskView

MAE = Column("MAE", "mae", "g", title="mean absolute error against the labels")
RMSE = Column("RMSE", "rmse", "g", title="root mean square error against the labels")
D_RMSE = Column("ΔRMSE", "rmse_increase", "signed_pct", "high", "RMSE change against the PC baseline's", True)
COS_MIN = Column("cos min", "cosine_min", "cosine", title="smallest per-sample cosine with the PC baseline's outputs")
MAX_ERR = Column("max err", "max_abs_error", "float", title="largest |output − PC baseline's output|")


def regression_errors(predicted: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(MAE, RMSE) of predictions against float labels of the same number of values per sample."""
    p = np.asarray(predicted, np.float64).reshape(len(labels), -1)
    y = np.asarray(labels, np.float64).reshape(len(labels), -1)
    if p.shape != y.shape:
        raise ValueError(f"the output has {p.shape[1]} values per sample, the labels {y.shape[1]}")
    d = p - y
    return float(np.abs(d).mean()), float(np.sqrt(np.mean(d * d)))


def increase(value: float, baseline: float) -> float:
    """(value - baseline) / baseline: 0.05 is 5% worse (a baseline of 0: 0 when equal, else infinity)."""
    if baseline == 0:
        return 0.0 if value == 0 else float("inf")
    return (value - baseline) / baseline


class Regression(Task):
    name = "regression"
    tolerances = {"none": {"rmse_increase": (0.001, 0.01), "rel_error": (1e-4, 1e-2)},
                  "quantized": {"rmse_increase": (0.05, 0.20), "rel_error": (0.05, 0.25)}}
    view = TaskView(
        "regression", (MAE, RMSE, D_RMSE, COS_MIN, MAX_ERR), (RMSE, D_RMSE, MAE, COS_MIN), D_RMSE,
        RMSE, "RMSE against the labels", "rmse", "float targets", row_metric=D_RMSE,
        sections=frozenset({"outputs"}), plots=frozenset({"fits"}))

    def claims(self, y: np.ndarray | None, scored_shape: tuple[int, ...]) -> bool:
        return y is not None and len(y) > 0 and not np.issubdtype(np.asarray(y).dtype, np.integer)

    def check_labels(self, y: np.ndarray, values: int, where: str) -> None:
        width = int(np.prod(y.shape[1:])) if y.ndim > 1 else 1
        if len(y) and width != values:
            raise DataError(f"{where}: the regression targets y hold {width} value(s) per sample, the scored output "
                            f"{values}; store targets of the output's shape")

    def score(self, target: np.ndarray, baseline: np.ndarray, y: np.ndarray | None) -> Scores:
        if y is None:
            return Scores()
        mae, rmse = regression_errors(target, y)
        base_mae, base_rmse = regression_errors(baseline, y)
        return Scores(fields={"mae": mae, "rmse": rmse, "baseline_mae": base_mae, "baseline_rmse": base_rmse,
                              "mae_increase": increase(mae, base_mae), "rmse_increase": increase(rmse, base_rmse)})


__all__ = ["Regression", "increase", "regression_errors"]
