"""Small data for tests: scikit-learn's bundled 8x8 digits, and a seeded
synthetic generator whose classes are learnable (a bright blob whose position
depends on the class, plus noise). Nothing here is for reporting accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deploytool.data.raw import RawData, register_dataset
from deploytool.spec import ModelSpec


def digits(test_fraction: float = 0.2, seed: int = 0) -> RawData:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = d.images.astype(np.float32)[..., None]  # 0..16
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    cut = int(len(x) * (1 - test_fraction))
    tr, te = perm[:cut], perm[cut:]
    return RawData(x[tr], y[tr], x[te], y[te], "scikit-learn load_digits (UCI optical digits, bundled with scikit-learn)")


def generate(shape: tuple[int, int, int], num_classes: int, n_train: int = 512, n_test: int = 128,
             seed: int = 0) -> RawData:
    h, w, c = shape
    rng = np.random.default_rng(seed)

    def make(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, num_classes, n)
        x = rng.normal(40, 20, (n, h, w, c))
        for i, k in enumerate(y):
            r = int((k * 7919) % max(1, h - 2))
            col = int((k * 104729) % max(1, w - 2))
            x[i, r : r + 3, col : col + 3, :] += 180
        return np.clip(x, 0, 255).astype(np.uint8), y

    xtr, ytr = make(n_train)
    xte, yte = make(n_test)
    return RawData(xtr, ytr, xte, yte, f"synthetic (seed {seed})")


@register_dataset("digits")
def _digits(spec: ModelSpec, data_dir: Path | None) -> RawData:
    return digits()


@register_dataset("synthetic")
def _synthetic(spec: ModelSpec, data_dir: Path | None) -> RawData:
    return generate(spec.hwc, spec.num_classes, seed=spec.train.seed)
