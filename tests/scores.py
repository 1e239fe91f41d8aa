"""Tests' shorthand for judging one array of class scores against the baseline's: the production entry point,
`compare_outputs`, with the scores as the one output an image classifier's row is judged on
(deploytool.run.judge.SCORES)."""

from __future__ import annotations

from typing import Any

import numpy as np

from deploytool.result import Comparison
from deploytool.run.compare import compare_outputs
from deploytool.run.judge import SCORES


def compare(outputs: Any, baseline: Any, y_true: np.ndarray | None, tolerances: dict[str, tuple[float, float]],
            **kwargs: Any) -> Comparison:
    n = len(baseline)
    return compare_outputs({SCORES: np.asarray(outputs).reshape(n, -1)},
                           {SCORES: np.asarray(baseline).reshape(n, -1)}, y_true, tolerances,
                           **{"task": "classification", **kwargs})
