"""Features: any other float tensor, e.g. a tabular model's (N, F). A zoo architecture that reads them takes an
image's values flat (H * W * C)."""

from __future__ import annotations

from deploytool.kinds.base import InputKind


class Features(InputKind):
    name = "features"
    description = "values per sample (N, F)"

    def claims(self, dtype: str, shape: tuple[int | None, ...], quantized: bool) -> bool:
        return True  # the last of the built-in kinds: every float input the others leave

    def from_hwc(self, hwc: tuple[int, int, int]) -> tuple[int, ...]:
        h, w, c = hwc
        return (h * w * c,)
