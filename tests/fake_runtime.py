"""A test double of a *runtime*, not of any real part: "onnxruntime-shifted" is a second host runtime for ONNX
files that runs the real onnxruntime and then, like a buggy runtime, adds `OFFSET` to the first value of what
it returns for every sample. It shows that a new runtime is one module: the `@register_runtime` decorator offers it beside
onnxruntime (`--runtime onnxruntime-shifted`, a lab's `runtimes = [...]`); no file of deploytool names it.
Importing it registers it; a subprocess gets it with `DEPLOYTOOL_PLUGINS=tests.fake_runtime`, and a row's
measuring worker imports it by its module path."""

from __future__ import annotations

from deploytool import runtimes
from deploytool.data.feed import Batch
from deploytool.runtimes.base import Outputs
from deploytool.runtimes.onnxrt import OnnxRuntime

OFFSET = 100.0
NAME = "onnxruntime-shifted"


@runtimes.register_runtime("host", "onnx", NAME)
class ShiftedOnnxRuntime(OnnxRuntime):
    name = NAME

    def _run(self, inputs: Batch) -> Outputs:
        out = super()._run(inputs)
        out.outputs[:, 0] += OFFSET  # the first value of the (first) output, side by side with any others
        out.environment["runtime"] = NAME
        return out


def register() -> None:
    """Register it again (after `unregister`); importing the module has registered it once."""
    runtimes.register_runtime("host", "onnx", NAME)(ShiftedOnnxRuntime)


def unregister() -> None:
    runtimes.unregister("host", "onnx", NAME)
