"""`RawData`: what a dataset loader returns — the arrays as stored (images NHWC, any numeric dtype) and where
they came from — before deploytool.data checks and preprocesses them once; and `DATASETS`, the registry of
loaders by the name a manifest's `data.dataset` gives: each loader module registers its loaders with
`@register_dataset(name)`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from deploytool.registry import Registry
from deploytool.spec import ModelSpec
from deploytool.value import value


@value
class RawData:
    x_train: np.ndarray  # NHWC, any numeric dtype
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    origin: str


# dataset name -> loader(spec, data_dir): the raw arrays of the manifest's dataset (data_dir: the user's copy of
# the official files, when given)
Loader = Callable[[ModelSpec, "Path | None"], RawData]
DATASETS: Registry[Loader] = Registry("dataset")
register_dataset = DATASETS.register
