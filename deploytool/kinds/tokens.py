"""Token ids (and their masks): an integer input that is not a quantized tensor. Fed as stored, in its own dtype;
no zoo architecture reads them (the bundled datasets are images)."""

from __future__ import annotations

from deploytool.kinds.base import FLOAT_DTYPES, InputKind


class Tokens(InputKind):
    name = "tokens"
    description = "integer ids (N, steps): tokens, a mask, positions"

    def claims(self, dtype: str, shape: tuple[int | None, ...], quantized: bool) -> bool:
        return dtype not in FLOAT_DTYPES and not quantized
