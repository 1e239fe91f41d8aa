"""A task added from outside deploytool, in one module: per-pixel classification (semantic segmentation). Its
scored output holds one score per class for every pixel, classes on the last axis ([N, H, W, C], as Keras and a
channels-last ONNX write them); its labels are one class per pixel ([N, H, W] integers). It is judged by the share
of pixels whose class equals the baseline's (`pixel_agreement`) and, with labels, by the mean intersection over
union of the classes (`miou`) and its drop against the baseline's. Registered when imported: naming this module
in $DEPLOYTOOL_PLUGINS offers `--task segmentation` to migrate, its metrics to --tolerance, and its columns to
the report (tests/integration/test_task_plugin.py)."""

from __future__ import annotations

import numpy as np

from deploytool.errors import DataError
from deploytool.tasks import Column, Scores, Task, TaskView, register_task

NAME = "segmentation"

PIXEL_AGREE = Column("px agree", "pixel_agreement", "pct", "low", "share of pixels whose class equals the PC "
                     "baseline's", percent=True)
MIOU = Column("mIoU", "miou", "pct", title="mean intersection over union of the classes against the labels",
              percent=True)
MIOU_DROP = Column("ΔmIoU pts", "miou_drop_points", "points", "high",
                   "mIoU drop against the PC baseline's in percentage points")


def mean_iou(pred: np.ndarray, labels: np.ndarray, classes: int) -> float:
    """Mean over the classes present in the labels or the prediction of |pred ∩ label| / |pred ∪ label|."""
    ious = []
    for c in range(classes):
        p, t = pred == c, labels == c
        union = np.logical_or(p, t).sum()
        if union:
            ious.append(np.logical_and(p, t).sum() / union)
    return float(np.mean(ious)) if ious else 1.0


class Segmentation(Task):
    name = NAME
    metrics = {"pixel_agreement": "min", "miou_drop_points": "max"}
    label_metrics = ("miou_drop_points",)
    tolerances = {"none": {"pixel_agreement": (0.999, 0.99), "miou_drop_points": (0.1, 1.0)},
                  "quantized": {"pixel_agreement": (0.98, 0.95), "miou_drop_points": (1.0, 3.0)}}
    view = TaskView(NAME, (PIXEL_AGREE, MIOU, MIOU_DROP), (PIXEL_AGREE, MIOU, MIOU_DROP), PIXEL_AGREE, MIOU,
                    "mIoU (%)", "", "per-pixel classes", row_metric=PIXEL_AGREE)

    def check_labels(self, y: np.ndarray, values: int, where: str) -> None:
        if len(y) and (y.dtype.kind not in "iu" or y.ndim != 3):
            raise DataError(f"{where}: --task {NAME} takes y of one integer class per pixel, shape (N, H, W); "
                            f"got {y.dtype} {y.shape}")

    def score(self, target: np.ndarray, baseline: np.ndarray, y: np.ndarray | None) -> Scores:
        pred, base = target.argmax(-1), baseline.argmax(-1)
        metrics: dict[str, float | None] = {"pixel_agreement": float(np.mean(pred == base))}
        if y is not None:
            classes = target.shape[-1]
            miou, base_miou = mean_iou(pred, y, classes), mean_iou(base, y, classes)
            metrics.update(miou=miou, baseline_miou=base_miou, miou_drop_points=100.0 * (base_miou - miou))
        return Scores(metrics=metrics)


register_task(Segmentation())
