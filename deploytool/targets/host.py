"""The host target: converted models (TFLite, ONNX) in their runtimes on this
machine's CPU. A bug bundle's reproducer runs the same runtime, so it judges
the row itself."""

from __future__ import annotations

from deploytool.targets.base import Target


class HostTarget(Target):
    name = "host"
    label = "this machine's CPU"
    judges_itself = True
