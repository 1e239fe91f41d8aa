"""The host target: converted models (TFLite, ONNX) in their runtimes on this
machine's CPU. A bug bundle's reproducer runs the same runtime, so it judges
the row itself."""

from __future__ import annotations


from deploytool.targets.base import NoOptions, Preflight, Target
from deploytool.targets.flags import HostFlags

# How a host row's latency is measured enters every host row's identity: rows stored before it was timed against
# the PC baseline in alternating blocks (issue 25) are measured again, their accuracy and outputs unchanged. v2: the
# blocks go on past a busy spell and are judged against the reference's floor (deploytool.latency).
LATENCY_MEASURED = "paired-with-baseline-v2"


class HostTarget(HostFlags, Target[NoOptions]):
    label = "this machine's CPU"
    judges_itself = True

    def preflight(self, options: NoOptions, *, run: bool = True) -> Preflight:
        return Preflight(identity={"latency": LATENCY_MEASURED})

    def lab_preflight(self, options: NoOptions, resources: dict[str, dict[str, str]]) -> Preflight:
        return Preflight(identity={"latency": LATENCY_MEASURED})

    def local_resources(self, browsers: int = 1) -> dict[str, float]:
        return {"host": 1}  # every lab worker runs host rows, one at a time
