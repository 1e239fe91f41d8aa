"""Registry of runtimes, keyed by (target, artifact format, runtime name): one
target may offer several runtimes for one format (chosen with `--runtime`, or
run side by side). The first registered for (target, format) is its default.
One module per runtime; modules are imported only when used. A runtime outside deploytool registers itself with
the `@register_runtime(target, format, name)` decorator when its module is imported (named in $DEPLOYTOOL_PLUGINS,
every lookup here imports those modules first)."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from deploytool.errors import StageFailed, UnknownOption
from deploytool.registry import load_plugins
from deploytool.runtimes.base import Outputs, Runtime

# (target, artifact format, runtime name) -> "module:Class" (or a class registered at run time)
REGISTRY: dict[tuple[str, str, str], str | type[Runtime]] = {}


def implementation(runtime: str | type[Runtime]) -> str:
    """"module:Class" of a registered runtime (a class or its string reference)."""
    return runtime if isinstance(runtime, str) else f"{runtime.__module__}:{runtime.__qualname__}"


def register(target: str, fmt: str, name: str, runtime: str | type[Runtime]) -> None:
    """Offer `runtime` for `fmt` artifacts on `target` under `name`; the first one per (target, fmt) is the default.
    A name is one implementation: registering another under a name taken (a plugin's `onnxruntime`) is refused,
    else rows measured by one would be taken for the other's; so is anything but a Runtime subclass."""
    if not isinstance(runtime, str) and not (isinstance(runtime, type) and issubclass(runtime, Runtime)):
        raise UnknownOption(f"a plugin registers {runtime!r} as runtime {name!r}: a runtime is a subclass of "
                            "deploytool.runtimes.base.Runtime (see tests/fake_runtime.py)")
    held = REGISTRY.get((target, fmt, name))
    if held is not None and implementation(held) != implementation(runtime):
        raise UnknownOption(f"runtime {name!r} for {fmt} on {target} is {implementation(held)} already; "
                            f"{implementation(runtime)} must register under a name of its own")
    REGISTRY[(target, fmt, name)] = runtime


def register_runtime(target: str, fmt: str, name: str) -> Callable[[type[Runtime]], type[Runtime]]:
    """The decorator: `@register_runtime("host", "onnx", "my-ort")` above a Runtime class offers it for `fmt`
    artifacts on `target` (after the runtimes registered before it: `--runtime my-ort` picks it)."""

    def add(cls: type[Runtime]) -> type[Runtime]:
        register(target, fmt, name, cls)
        return cls

    return add


def runtime_implementation(target: str, name: str) -> str:
    """"module:Class" of the runtime registered as `name` on `target` ("" when there is none)."""
    load_plugins()
    return next((implementation(v) for (t, _, n), v in REGISTRY.items() if t == target and n == name), "")


def unregister(target: str, fmt: str | None = None, name: str | None = None) -> None:
    """Forget `target`'s runtimes (only those for `fmt`, or only `name`, when given)."""
    for key in [k for k in REGISTRY if k[0] == target and fmt in (None, k[1]) and name in (None, k[2])]:
        del REGISTRY[key]


for _target, _fmt, _name, _ref in (
    ("pc", "keras", "keras", "deploytool.runtimes.keras:KerasRuntime"),
    ("pc", "saved_model", "keras", "deploytool.runtimes.keras:KerasRuntime"),
    ("pc", "torch", "torch", "deploytool.runtimes.torch:TorchRuntime"),
    # a user's own .onnx / .tflite is its own baseline, in its reference runtime
    ("pc", "onnx", "onnxruntime", "deploytool.runtimes.onnxrt:OnnxRuntime"),
    ("pc", "tflite", "litert", "deploytool.runtimes.litert:LiteRTRuntime"),
    ("host", "tflite", "litert", "deploytool.runtimes.litert:LiteRTRuntime"),
    ("host", "tflite", "tensorflow-lite", "deploytool.runtimes.tflite_tf:TensorFlowLiteRuntime"),
    ("host", "onnx", "onnxruntime", "deploytool.runtimes.onnxrt:OnnxRuntime"),
    ("web", "tfjs_graph", "tfjs", "deploytool.runtimes.web:WebRuntime"),
    ("web", "onnx", "onnxruntime-web", "deploytool.runtimes.web:WebRuntime"),
    ("web", "tflite", "tfjs-tflite", "deploytool.runtimes.web:WebRuntime"),
    ("android", "tflite", "benchmark_model", "deploytool.runtimes.android:AndroidRuntime"),
):
    register(_target, _fmt, _name, _ref)


def runtimes_for(target: str, fmt: str) -> list[str]:
    """The runtime names for `fmt` on `target`, the default first."""
    load_plugins()
    return [n for (t, f, n) in REGISTRY if t == target and f == fmt]


def all_runtime_names() -> list[str]:
    """Runtimes `--runtime` can pick (the PC baseline's own are not among them)."""
    load_plugins()
    return list(dict.fromkeys(n for (t, _, n) in REGISTRY if t != "pc"))


def default_runtime(target: str, fmt: str) -> str:
    names = runtimes_for(target, fmt)
    return names[0] if names else ""


def formats_on(target: str) -> tuple[str, ...]:
    load_plugins()
    return tuple(dict.fromkeys(f for (t, f, _) in REGISTRY if t == target))


def runtime_class(target: str, fmt: str, runtime: str = "") -> type[Runtime]:
    names = runtimes_for(target, fmt)
    if not names:
        where = sorted({t for (t, f, _) in REGISTRY if f == fmt and t != "pc"})
        raise StageFailed("not_applicable", f"{fmt} models do not run on the {target} target"
                          + (f" (they run on: {', '.join(where)})" if where else ""))
    name = runtime or names[0]
    if name not in names:
        raise StageFailed("not_applicable", f"the {name} runtime does not run {fmt} models on the {target} target "
                                            f"(runtimes there: {', '.join(names)})")
    ref = REGISTRY[(target, fmt, name)]
    if not isinstance(ref, str):
        return ref
    module, cls = ref.split(":")
    return getattr(importlib.import_module(module), cls)


def make_runtime(target: str, fmt: str, runtime: str = "", **options: Any) -> Runtime:
    return runtime_class(target, fmt, runtime)(**options)


def check_runtime_names(names: list[str]) -> None:
    known = all_runtime_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownOption(f"unknown runtime {unknown[0]!r}; runtimes are {', '.join(known)}")


__all__ = ["Outputs", "REGISTRY", "Runtime", "default_runtime", "formats_on", "make_runtime", "register",
           "runtime_class", "runtimes_for", "unregister"]
