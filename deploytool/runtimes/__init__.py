"""Registry of runtimes, on the one `Registry` (deploytool.registry), keyed by target, artifact format and runtime
name: one target may offer several runtimes for one format (chosen with `--runtime`, or run side by side). The
first registered for (target, format) is its default. One module per runtime; the built-in ones are lazy entries
whose loader imports their module when first looked up. A runtime outside deploytool registers itself with the
`@register_runtime(target, format, name)` decorator when its module is imported (named in $DEPLOYTOOL_PLUGINS,
every lookup here imports those modules first)."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from deploytool.errors import StageFailed, UnknownOption
from deploytool.registry import Registry, load_plugins
from deploytool.runtimes.base import Outputs, Runtime

Key = tuple[str, str, str]  # (target, artifact format, runtime name)
RUNTIMES: Registry[type[Runtime]] = Registry("runtime")  # "target/format/name" -> its Runtime class


def _name(key: Key) -> str:
    return "/".join(key)


class _ByKey(Mapping[Key, "type[Runtime]"]):
    """RUNTIMES by (target, format, name): the view every lookup here reads (and the contract tests iterate)."""

    def __getitem__(self, key: Key) -> type[Runtime]:
        return RUNTIMES[_name(key)]

    def __iter__(self) -> Iterator[Key]:
        return ((t, f, n) for t, f, n in (k.split("/", 2) for k in RUNTIMES))

    def __len__(self) -> int:
        return len(RUNTIMES)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and _name(key) in RUNTIMES


REGISTRY = _ByKey()


def implementation(runtime: type[Runtime]) -> str:
    """"module:Class" of a runtime class (what a row's identity records, and a worker process imports)."""
    return f"{runtime.__module__}:{runtime.__qualname__}"


def register(target: str, fmt: str, name: str, runtime: type[Runtime]) -> None:
    """Offer `runtime` for `fmt` artifacts on `target` under `name`; the first one per (target, fmt) is the default.
    A name is one implementation: registering another under a name taken (a plugin's `onnxruntime`) is refused,
    else rows measured by one would be taken for the other's; so is anything but a Runtime subclass."""
    if not (isinstance(runtime, type) and issubclass(runtime, Runtime)):
        raise UnknownOption(f"a plugin registers {runtime!r} as runtime {name!r}: a runtime is a subclass of "
                            "deploytool.runtimes.base.Runtime (see tests/fake_runtime.py)")
    if any("/" in w for w in (target, fmt, name)):
        raise UnknownOption(f"runtime {name!r} for {fmt} on {target}: names cannot hold '/'")
    key = (target, fmt, name)
    if key in REGISTRY and implementation(REGISTRY[key]) != implementation(runtime):
        raise UnknownOption(f"runtime {name!r} for {fmt} on {target} is {implementation(REGISTRY[key])} already; "
                            f"{implementation(runtime)} must register under a name of its own")
    RUNTIMES.add(_name(key), runtime)


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
    return next((implementation(REGISTRY[k]) for k in REGISTRY if k[0] == target and k[2] == name), "")


def unregister(target: str, fmt: str | None = None, name: str | None = None) -> None:
    """Forget `target`'s runtimes (only those for `fmt`, or only `name`, when given)."""
    for key in [k for k in REGISTRY if k[0] == target and fmt in (None, k[1]) and name in (None, k[2])]:
        RUNTIMES.unregister(_name(key))


# -- the built-in runtimes: each loader imports its module when the runtime is first looked up ---------------
def _keras() -> type[Runtime]:
    from deploytool.runtimes.keras import KerasRuntime

    return KerasRuntime


def _torch() -> type[Runtime]:
    from deploytool.runtimes.torch import TorchRuntime

    return TorchRuntime


def _onnxruntime() -> type[Runtime]:
    from deploytool.runtimes.onnxrt import OnnxRuntime

    return OnnxRuntime


def _litert() -> type[Runtime]:
    from deploytool.runtimes.litert import LiteRTRuntime

    return LiteRTRuntime


def _tensorflow_lite() -> type[Runtime]:
    from deploytool.runtimes.tflite_tf import TensorFlowLiteRuntime

    return TensorFlowLiteRuntime


def _web() -> type[Runtime]:
    from deploytool.runtimes.web import WebRuntime

    return WebRuntime


def _android() -> type[Runtime]:
    from deploytool.runtimes.android import AndroidRuntime

    return AndroidRuntime


for _key, _load in (
    (("pc", "keras", "keras"), _keras),
    (("pc", "saved_model", "keras"), _keras),
    (("pc", "torch", "torch"), _torch),
    # a user's own .onnx / .tflite is its own baseline, in its reference runtime
    (("pc", "onnx", "onnxruntime"), _onnxruntime),
    (("pc", "tflite", "litert"), _litert),
    (("host", "tflite", "litert"), _litert),
    (("host", "tflite", "tensorflow-lite"), _tensorflow_lite),
    (("host", "onnx", "onnxruntime"), _onnxruntime),
    (("web", "tfjs_graph", "tfjs"), _web),
    (("web", "onnx", "onnxruntime-web"), _web),
    (("web", "tflite", "tfjs-tflite"), _web),
    (("android", "tflite", "benchmark_model"), _android),
):
    RUNTIMES.lazy(_name(_key), _load)


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
    return REGISTRY[(target, fmt, name)]


def make_runtime(target: str, fmt: str, runtime: str = "", **options: Any) -> Runtime:
    return runtime_class(target, fmt, runtime)(**options)


def check_runtime_names(names: list[str]) -> None:
    known = all_runtime_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnknownOption(f"unknown runtime {unknown[0]!r}; runtimes are {', '.join(known)}")


__all__ = ["Outputs", "REGISTRY", "RUNTIMES", "Runtime", "default_runtime", "formats_on", "make_runtime", "register",
           "runtime_class", "runtimes_for", "unregister"]
