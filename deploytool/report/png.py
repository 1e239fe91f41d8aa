"""A minimal PNG encoder (zlib + struct) for the flipped-sample gallery: grey,
RGB or RGBA 8-bit images, no filtering, optional nearest-neighbour upscaling,
and data: URIs so the HTML report stays one self-contained file. It encodes
pixels it is given; it never reads image files or decides what to show.
"""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, RGB, RGBA)


def _chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def encode_png(pixels: np.ndarray, level: int = 6) -> bytes:
    """PNG bytes of a uint8 image shaped (H, W), (H, W, 1), (H, W, 3) or (H, W, 4)."""
    a = np.asarray(pixels)
    if a.dtype != np.uint8:
        raise ValueError(f"encode_png needs uint8 pixels, got {a.dtype}; use to_uint8() first")
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in _COLOUR_TYPES or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"encode_png needs (H, W[, 1|3|4]) pixels, got shape {np.shape(pixels)}")
    h, w, c = a.shape
    raw = np.zeros((h, 1 + w * c), dtype=np.uint8)  # first byte of each row: filter type 0 (none)
    raw[:, 1:] = a.reshape(h, w * c)
    header = struct.pack(">IIBBBBB", w, h, 8, _COLOUR_TYPES[c], 0, 0, 0)
    return (SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw.tobytes(), level))
            + _chunk(b"IEND", b""))


def to_uint8(image: np.ndarray) -> np.ndarray:
    """Float pixels in [0, 1] (clipped) or uint8 pixels -> uint8, with a trailing channel axis."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        a = np.clip(np.nan_to_num(a.astype(np.float32), nan=0.0) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return a[:, :, None] if a.ndim == 2 else a


def upscale(image: np.ndarray, factor: int) -> np.ndarray:
    """Nearest-neighbour upscaling, so small samples (28x28) stay crisp instead of blurred by the browser."""
    if factor <= 1:
        return image
    return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)


def scale_factor(height: int, width: int, target_px: int = 56) -> int:
    return max(1, -(-target_px // max(height, width, 1)))


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def thumbnail_uri(image: np.ndarray, target_px: int = 56) -> tuple[str, int, int]:
    """(data URI, width, height) of one sample drawn at about `target_px` pixels."""
    a = to_uint8(image)
    a = upscale(a, scale_factor(a.shape[0], a.shape[1], target_px))
    return data_uri(encode_png(a)), a.shape[1], a.shape[0]
