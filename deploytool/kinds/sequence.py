"""Sequences: a float tensor of rank 3 (N, steps, features). A zoo architecture that reads one takes an image's
rows as its steps (sequential MNIST: 28 steps of 28 pixels)."""

from __future__ import annotations

from deploytool.kinds.base import InputKind


class Sequence(InputKind):
    name = "sequence"
    description = "a sequence (N, steps, features)"

    def claims(self, dtype: str, shape: tuple[int | None, ...], quantized: bool) -> bool:
        return len(shape) == 3

    def from_hwc(self, hwc: tuple[int, int, int]) -> tuple[int, ...]:
        h, w, c = hwc
        return (h, w * c)
