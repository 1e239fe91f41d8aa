"""Preprocessing mistakes: what a model is fed when a user gets one step of its preprocessing wrong. Each
mistake maps the raw test images (NHWC, as stored) and the declared preprocessing to the float32 NHWC
tensor the model then sees; a mistake that cannot happen to this data says why (`not_applicable`). The
pitfalls study (deploytool/study/pitfalls.py) feeds these tensors to the PC model and every migrated
artifact. Pure numpy: nothing here loads or runs a model.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from deploytool.spec import Preprocess
from deploytool.value import value

# The off-centre crop: the standard ImageNet evaluation crop (224 of 256 = 87.5%), taken at the top-left
# corner instead of the centre, then resized back to the input size.
CROP_FRACTION = 0.875


def preprocess(x: np.ndarray, p: Preprocess) -> np.ndarray:
    """The declared preprocessing, (x * scale - mean) / std per channel, as float32."""
    out = np.asarray(x, np.float32) * np.float32(p.scale)
    return (out - np.asarray(p.mean, np.float32)) / np.asarray(p.std, np.float32)


def reread(x: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """The bytes of `x` laid out in `order` and read back in x's own shape: a reshape where a transpose
    was needed (e.g. NCHW bytes read as NHWC)."""
    return np.ascontiguousarray(x.transpose(order)).reshape(x.shape)


def resize_bilinear(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """NHWC bilinear resize with half-pixel centres (what image libraries do), in numpy."""
    def axis(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
        lo = np.floor(pos).astype(int)
        return lo, np.minimum(lo + 1, src - 1), (pos - lo).astype(np.float32)

    y0, y1, wy = axis(x.shape[1], height)
    x0, x1, wx = axis(x.shape[2], width)
    rows = x[:, y0] * (1 - wy)[None, :, None, None] + x[:, y1] * wy[None, :, None, None]
    return (rows[:, :, x0] * (1 - wx)[None, None, :, None] + rows[:, :, x1] * wx[None, None, :, None]).astype(
        np.float32)


def corner_crop_resize(x: np.ndarray, fraction: float = CROP_FRACTION) -> np.ndarray:
    """A `fraction` crop taken at the top-left corner (not the centre), resized back to x's size."""
    h, w = x.shape[1:3]
    ch, cw = max(2, round(h * fraction)), max(2, round(w * fraction))
    return resize_bilinear(x[:, :ch, :cw], h, w)


def int8_unscaled(fed: np.ndarray, scale: float, zero_point: int, dtype: str = "int8") -> np.ndarray:
    """Float inputs that an int8-input runtime quantizes (q = round(x / scale) + zero_point) into the values
    a user writes when skipping that step: the preprocessed floats rounded into the integer tensor as they
    are. Runtimes here always quantize, so the mistake is fed as the float that quantizes to it."""
    info = np.iinfo(dtype)
    q = np.clip(np.round(fed), info.min, info.max)
    return ((q - zero_point) * scale).astype(np.float32)


@value
class Mistake:
    name: str  # a key: letters and '_'
    title: str  # what the user did, in their words
    # (raw NHWC, declared preprocessing) -> the raw data and preprocessing the user hands over by mistake
    user_data: Callable[[np.ndarray, Preprocess], tuple[np.ndarray, Preprocess]]
    why_not: Callable[[tuple[int, int, int], Preprocess], str | None]  # why it cannot happen to this data, or None

    def feed(self, x: np.ndarray, p: Preprocess) -> np.ndarray:
        """What the model sees (float32 NHWC)."""
        return preprocess(*self.user_data(x, p))

    def not_applicable(self, shape: tuple[int, int, int], p: Preprocess) -> str | None:
        return self.why_not(shape, p)


def _always(shape: tuple[int, int, int], p: Preprocess) -> None:
    return None


def _no_normalisation(shape: tuple[int, int, int], p: Preprocess) -> str | None:
    if all(m == 0 for m in p.mean) and all(s == 1 for s in p.std):
        return "the preprocessing has no mean or std to leave out"
    return None


def _no_scaling(shape: tuple[int, int, int], p: Preprocess) -> str | None:
    if p.scale >= 1:
        return f"the model is fed the stored pixel range (scale {p.scale:g}): there is no 0–1 scaling to skip"
    return None


def _one_channel(shape: tuple[int, int, int], p: Preprocess) -> str | None:
    return "with one channel, NCHW and NHWC hold the same bytes" if shape[2] == 1 else None


def _not_rgb(shape: tuple[int, int, int], p: Preprocess) -> str | None:
    return f"{shape[2]}-channel images have no RGB/BGR order" if shape[2] != 3 else None


MISTAKES: tuple[Mistake, ...] = (
    Mistake("no_normalisation", "no normalisation (mean/std not applied)",
            lambda x, p: (x, Preprocess(p.scale)), _no_normalisation),
    Mistake("range_0_255", "pixels 0–255 fed where 0–1 is expected",
            lambda x, p: (x, Preprocess(1.0, p.mean, p.std)), _no_scaling),
    Mistake("hw_swapped", "height and width swapped",
            lambda x, p: (reread(x, (0, 2, 1, 3)), p), _always),
    Mistake("nchw_as_nhwc", "NCHW bytes fed as NHWC (reshape, not transpose)",
            lambda x, p: (reread(x, (0, 3, 1, 2)), p), _one_channel),
    Mistake("rgb_bgr", "BGR fed where RGB is expected",
            lambda x, p: (np.ascontiguousarray(x[..., ::-1]), p), _not_rgb),
    Mistake("off_centre_crop", f"an off-centre crop ({CROP_FRACTION:.1%} at the corner) resized back",
            lambda x, p: (corner_crop_resize(np.asarray(x, np.float32)), p), _always),
)
# Applied per artifact (it needs the artifact's input scale and zero point), on int8-input artifacts only.
INT8_UNSCALED = ("int8_unscaled", "int8 input scaling skipped (floats written into the int8 tensor)")
BY_NAME = {m.name: m for m in MISTAKES}
NAMES = (*BY_NAME, INT8_UNSCALED[0])
