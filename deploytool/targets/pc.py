"""The PC target: the source model in its own framework (Keras, PyTorch) or a
user's model file in its reference runtime. It is the baseline every other
target is compared with, so `--target` does not offer it."""

from __future__ import annotations

from deploytool.targets.base import NoOptions, Target
from deploytool.targets.flags import PcFlags


class PcTarget(PcFlags, Target[NoOptions]):  # its name, and not offered to --target: flags.PcFlags
    label = "the PC baseline"
