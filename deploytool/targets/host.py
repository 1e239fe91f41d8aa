"""The host target: converted models (TFLite, ONNX) in their runtimes on this
machine's CPU. A bug bundle's reproducer runs the same runtime, so it judges
the row itself."""

from __future__ import annotations

from deploytool.targets.base import Target


class HostTarget(Target):
    name = "host"
    label = "this machine's CPU"
    judges_itself = True

    def local_resources(self, browsers: int = 1) -> dict[str, float]:
        return {"host": 1}  # every lab worker runs host rows, one at a time
