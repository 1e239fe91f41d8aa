"""Images: one float tensor of rank 4, preprocessed by --scale/--mean/--std, channels first for PyTorch."""

from __future__ import annotations

import numpy as np

from deploytool.kinds.base import InputKind


class Image(InputKind):
    name = "image"
    description = "an image (N, H, W, C), or (N, C, H, W) for a channels-first model"
    preprocessed = True
    torch_layout = "NCHW"

    def claims(self, dtype: str, shape: tuple[int | None, ...], quantized: bool) -> bool:
        return len(shape) == 4

    def from_hwc(self, hwc: tuple[int, int, int]) -> tuple[int, ...]:
        return tuple(hwc)

    def from_images(self, x: np.ndarray) -> np.ndarray:
        return x
