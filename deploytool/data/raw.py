"""`RawData`: what a dataset loader returns — the arrays as stored (images NHWC, any numeric dtype) and where
they came from — before deploytool.data checks and preprocesses them once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RawData:
    x_train: np.ndarray  # NHWC, any numeric dtype
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    origin: str
