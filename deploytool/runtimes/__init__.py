"""Registry of runtimes: which runtime runs which artifact format on which
target. One module per runtime; adding a runtime adds a line here, not a
branch elsewhere. Modules are imported only when used."""

from __future__ import annotations

import importlib
from typing import Any

from deploytool.errors import StageFailed, UnknownOption
from deploytool.runtimes.base import Outputs, Runtime

TARGETS = ("pc", "host", "web", "android")

# (target, artifact format) -> "module:Class"
REGISTRY: dict[tuple[str, str], str] = {
    ("pc", "keras"): "deploytool.runtimes.keras:KerasRuntime",
    ("pc", "saved_model"): "deploytool.runtimes.keras:KerasRuntime",
    ("pc", "torch"): "deploytool.runtimes.torch:TorchRuntime",
    # a user's own .onnx / .tflite is its own baseline, in its reference runtime
    ("pc", "onnx"): "deploytool.runtimes.onnxrt:OnnxRuntime",
    ("pc", "tflite"): "deploytool.runtimes.litert:LiteRTRuntime",
    ("host", "tflite"): "deploytool.runtimes.litert:LiteRTRuntime",
    ("host", "onnx"): "deploytool.runtimes.onnxrt:OnnxRuntime",
    ("web", "tfjs_graph"): "deploytool.runtimes.web:WebRuntime",
    ("web", "onnx"): "deploytool.runtimes.web:WebRuntime",
    ("web", "tflite"): "deploytool.runtimes.web:WebRuntime",
    ("android", "tflite"): "deploytool.runtimes.android:AndroidRuntime",
}


def runtime_class(target: str, fmt: str) -> type[Runtime]:
    if target not in TARGETS:
        raise UnknownOption(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
    ref = REGISTRY.get((target, fmt))
    if ref is None:
        where = sorted(t for t, f in REGISTRY if f == fmt)
        raise StageFailed("not_applicable", f"{fmt} models do not run on the {target} target"
                          + (f" (they run on: {', '.join(where)})" if where else ""))
    module, cls = ref.split(":")
    return getattr(importlib.import_module(module), cls)


def make_runtime(target: str, fmt: str, **options: Any) -> Runtime:
    return runtime_class(target, fmt)(**options)


__all__ = ["Outputs", "Runtime", "TARGETS", "make_runtime", "runtime_class"]
