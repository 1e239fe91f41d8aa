"""`InputKind`: what one input of a model takes (an image, a sequence, token ids, features), as a strategy. A kind
holds its rules: which inputs it claims from their dtype and rank (a model file's inputs are inferred so), how the
bundled image datasets become its samples (what a zoo architecture reads), whether the images' --scale/--mean/--std
apply to it, and how PyTorch takes it. deploytool.kinds registers them; nothing elsewhere tests a kind's name."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from deploytool.errors import SpecError

# numpy dtype names of float inputs (what the runtimes and converters here can feed)
FLOAT_DTYPES = ("float32", "float16", "float64")


class InputKind:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # the images' preprocessing (--scale/--mean/--std, per channel on the last axis) applies to inputs of this kind;
    # any other input is fed as the test set stores it
    preprocessed: ClassVar[bool] = False
    # how a PyTorch model takes a batch of it: "NCHW" (channels first, the samples transposed from the datasets'
    # channels-last), or "NHWC": as stored
    torch_layout: ClassVar[str] = "NHWC"

    def claims(self, dtype: str, shape: tuple[int | None, ...], quantized: bool) -> bool:
        """An input of numpy dtype `dtype` and `shape` (batch first) takes this kind of data; `quantized`: an integer
        tensor with a scale and zero point (it takes floats). Inference asks the kinds in their order."""
        return False

    def from_hwc(self, hwc: tuple[int, int, int]) -> tuple[int, ...]:
        """One sample's shape when an image of (height, width, channels) is read as this kind: what a zoo
        architecture of this kind takes from the bundled image datasets."""
        raise SpecError(f"input kind {self.name!r} cannot be read from the bundled image datasets: give the "
                        "architecture an image, sequence or features input")

    def from_images(self, x: np.ndarray) -> np.ndarray:
        """Preprocessed images (N, H, W, C) as this kind's samples (N, *from_hwc)."""
        h, w, c = (int(d) for d in x.shape[1:])
        return x.reshape(len(x), *self.from_hwc((h, w, c)))

    def __repr__(self) -> str:
        return f"<input kind {self.name}>"
