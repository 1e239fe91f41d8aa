"""A runtime test double for the lab's regression tests (named as one): it runs the
real LiteRT interpreter for the outputs, then replaces the measured latencies with
a seeded synthetic distribution (so identical nights are identical, as they would
be on a quiet machine) scaled by `SLOWER`, and flips the top class of the first
`FLIPS` samples. Registered on the host target as runtime "lab-double"."""

from __future__ import annotations

import numpy as np

from deploytool import runtimes
from deploytool.runtimes.base import Outputs
from deploytool.runtimes.litert import LiteRTRuntime

KNOBS = {"slower": 1.0, "flips": 0, "seed": 0}


class LabDouble(LiteRTRuntime):
    name = "lab-double"

    def _run(self, inputs: np.ndarray) -> Outputs:
        out = super()._run(inputs)
        rng = np.random.default_rng(KNOBS["seed"])
        out.latency_ms = rng.lognormal(np.log(0.2 * KNOBS["slower"]), 0.2, len(out.latency_ms))
        n = int(KNOBS["flips"])
        if n:
            top = out.outputs[:n].argmax(1)
            out.outputs[np.arange(n), (top + 1) % out.outputs.shape[1]] += 1000.0
        out.environment["runtime"] = self.name
        return out


def register() -> None:
    runtimes.register("host", "tflite", "lab-double", LabDouble)


def unregister() -> None:
    runtimes.REGISTRY.pop(("host", "tflite", "lab-double"), None)
