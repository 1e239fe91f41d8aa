"""An input kind added from outside deploytool, in one module: an image read column by column (steps = its
width, each step the column's height x channels values), the transpose of the built-in `sequence` (rows as steps).
With it, a zoo architecture of its own, `gru_columns`, a GRU reading that kind. Registered when imported: naming
this module in $DEPLOYTOOL_PLUGINS offers both to migrate (tests/integration/test_kind_plugin.py);
tests/unit/test_kind_registry.py and tests/integration/test_zoo.py show them flowing through a manifest, the data
and both frameworks' twins."""

from __future__ import annotations

import numpy as np

from deploytool.kinds import KINDS, InputKind, register_kind
from deploytool.zoo import plans

NAME = "columns"
ARCH = "gru_columns"


class Columns(InputKind):
    name = NAME
    description = "an image's columns as a sequence (N, width, height * channels)"

    def from_hwc(self, hwc: tuple[int, int, int]) -> tuple[int, ...]:
        h, w, c = hwc
        return (w, h * c)

    def from_images(self, x: np.ndarray) -> np.ndarray:
        n, h, w, c = x.shape
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(n, w, h * c))


register_kind(Columns())


@plans.register_architecture(ARCH, reads=NAME)
def _gru_columns(num_classes: int) -> tuple[plans.Op, ...]:
    return (plans.GRU("gru", 16), plans.Dense("fc", num_classes))


def unregister() -> None:
    """Forget the kind and the architecture again (a test that imported this module in its own process)."""
    KINDS.unregister(NAME)
    plans.ARCHITECTURES.unregister(ARCH)
    plans.INPUT_KINDS.pop(ARCH, None)
