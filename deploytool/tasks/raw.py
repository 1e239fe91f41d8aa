"""Raw outputs: no labels to score against and no classes to agree on (embeddings, feature maps, an output of one
value). Judged by the outputs' likeness to the PC baseline's: the smallest per-sample cosine and the error over
their range. Inferred when nothing else claims the run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from deploytool.tasks.base import Column, Task, TaskView

COS_MIN = Column("cos min", "cosine_min", "cosine", title="smallest per-sample cosine with the PC baseline's outputs")
REL_ERR = Column("rel err", "rel_error", "g", title="largest |error| over the output's range")
MAX_ERR = Column("max err", "max_abs_error", "float", title="largest |output − PC baseline's output|")
MEAN_ERR = Column("mean err", "mean_abs_error", "g", title="mean |output − PC baseline's output|")


class Raw(Task):
    name = "raw"
    scores_one_output = False
    tolerances = {"none": {"rel_error": (1e-4, 1e-2), "cosine_min": (0.9999, 0.999)},
                  "quantized": {"cosine_min": (0.99, 0.95), "rel_error": (0.05, 0.20)}}
    view = TaskView(
        "raw", (COS_MIN, REL_ERR, MAX_ERR, MEAN_ERR), (COS_MIN, replace(REL_ERR, fmt="e"), replace(MAX_ERR, fmt="e")),
        COS_MIN, COS_MIN, "smallest cosine with the PC baseline", "", "no labels",
        sections=frozenset({"outputs"}), plots=frozenset({"per_output"}))

    def claims(self, y: np.ndarray | None, scored_shape: tuple[int, ...]) -> bool:
        return True  # the last built-in: what no other task claims is compared as raw outputs


__all__ = ["Raw"]
