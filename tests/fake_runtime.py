"""Test doubles of a *runtime*, not of any real part: "onnxruntime-shifted" is a second host runtime for ONNX
files that runs the real onnxruntime and then, like a buggy runtime, adds `OFFSET` to the first value of what
it returns for every sample; "onnxruntime-crashing" runs it and then crashes in its own code (a planted
deploytool-side bug: triage must call it deploytool's, never upstream's). It shows that a new runtime is one module: the `@register_runtime` decorator offers it beside
onnxruntime (`--runtime onnxruntime-shifted`, a lab's `runtimes = [...]`); no file of deploytool names it.
Importing it registers it; a subprocess gets it with `DEPLOYTOOL_PLUGINS=tests.fake_runtime`, and a row's
measuring worker imports it by its module path."""

from __future__ import annotations

from deploytool import runtimes
from deploytool.data.feed import Feed
from deploytool.runtimes.base import Outputs
from deploytool.runtimes.onnxrt import OnnxRuntime

OFFSET = 100.0
NAME = "onnxruntime-shifted"
CRASHING = "onnxruntime-crashing"


@runtimes.register_runtime("host", "onnx", NAME)
class ShiftedOnnxRuntime(OnnxRuntime):
    name = NAME

    def _run(self, inputs: Feed) -> Outputs:
        out = super()._run(inputs)
        out.outputs[:, 0] += OFFSET  # the first value of the (first) output, side by side with any others
        out.environment["runtime"] = NAME
        return out


@runtimes.register_runtime("host", "onnx", CRASHING)
class CrashingOnnxRuntime(OnnxRuntime):
    """A planted bug in deploytool's own kind of code (a runtime module, not the library it drives): after the real
    onnxruntime ran, it reads an attribute its outputs do not have, as the dict-outputs crash did."""

    name = CRASHING

    def _run(self, inputs: Feed) -> Outputs:
        out = super()._run(inputs)
        out.outputs = out.outputs.numpy()  # type: ignore[attr-defined]  # AttributeError: the planted bug
        return out


def register() -> None:
    """Register them again (after `unregister`); importing the module has registered them once."""
    runtimes.register_runtime("host", "onnx", NAME)(ShiftedOnnxRuntime)
    runtimes.register_runtime("host", "onnx", CRASHING)(CrashingOnnxRuntime)


def unregister() -> None:
    runtimes.unregister("host", "onnx", NAME)
    runtimes.unregister("host", "onnx", CRASHING)
