"""The web target: TF.js and ONNX Runtime Web in headless Chromium. Its axis is
the backend: wasm, cpu, webgl or webgpu for TF.js graphs, wasm or webgpu (the
WebGPU execution provider) for ONNX; TFLite models run on wasm. A backend word
may name its library (`tfjs:webgpu`, `ort:webgpu`) to widen only that
library's rows; a format none of whose backends was chosen runs on wasm. Rows
are identified by the Chromium build they ran in, and WebGPU rows also by the
adapter that browser offers (found in the preflight). A run's rows share one
Chromium (its session; WebGPU rows a second one launched for them), each in a
fresh browser context."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from deploytool.devices.browser import chromium_build, find_chromium
from deploytool.devices.web_harness import check_harness
from deploytool.runtimes.web_backends import BACKENDS, FORMAT_BACKENDS
from deploytool.runtimes.web_gpu import adapter_label
from deploytool.targets.base import Position, Preflight, RunSettings, Target, TargetOptions, expand
from deploytool.targets.flags import WebFlags
from deploytool.value import value

# a backend word may name the library whose rows it widens: tfjs:<backend> (TF.js graphs), ort:<backend> (ONNX)
LIBRARIES = {"tfjs": "tfjs_graph", "ort": "onnx"}
BACKEND_WORDS = (*BACKENDS, *(f"{lib}:{b}" for lib, fmt in LIBRARIES.items() for b in FORMAT_BACKENDS[fmt]))
ADAPTER_KEY = "webgpu_adapter"  # the preflight identity's entry that only WebGPU rows carry


def backends_for(backends: tuple[str, ...], artifact_format: str) -> list[str]:
    """The chosen backends that run this format, in order; none of them: wasm."""
    offered = FORMAT_BACKENDS.get(artifact_format, ("wasm",))
    out = []
    for word in backends:
        lib, _, backend = word.rpartition(":")
        if backend in offered and (not lib or LIBRARIES[lib] == artifact_format):
            out.append(backend)
    return list(dict.fromkeys(out)) or ["wasm"]


@value
class WebOptions(TargetOptions):
    backends: tuple[str, ...] = ("wasm",)

    def __post_init__(self) -> None:
        words = [",".join(BACKENDS) if w.strip() == "all" else w for v in self.backends for w in str(v).split(",")]
        object.__setattr__(self, "backends", tuple(expand(words, BACKEND_WORDS, "web backend")))

    @property
    def webgpu(self) -> bool:
        return any(w.rpartition(":")[2] == "webgpu" for w in self.backends)


class WebTarget(WebFlags, Target[WebOptions]):  # its name and flags: flags.WebFlags
    label = "headless Chromium"
    Options = WebOptions

    def positions(self, options: WebOptions, preflight: Preflight, artifact_format: str) -> list[Position]:
        return [Position(backend=b) for b in backends_for(options.backends, artifact_format)]

    def preflight(self, options: WebOptions, *, run: bool = True) -> Preflight:
        if not run:
            return Preflight()

        find_chromium()  # before anything runs: a missing browser is one line, not a column of failures
        root = check_harness()
        identity = {"browser": chromium_build()}
        if options.webgpu:  # the adapter WebGPU rows will get is where they run: part of their key
            # the browser session's machinery (an HTTP server, Playwright) loads when a run uses it: a command
            # that only parses --backend does not pay for it (bench/bench_user_onnx.py)
            from deploytool.runtimes.web_session import probe_webgpu_adapter

            adapter = probe_webgpu_adapter(root)
            identity[ADAPTER_KEY] = adapter_label(adapter) if adapter.get("available") else \
                f"none: {adapter.get('reason', 'unknown')}"
        return Preflight(identity=identity)

    def row_identity(self, identity: dict[str, str], position: Position) -> dict[str, str]:
        return {k: v for k, v in identity.items() if k != ADAPTER_KEY or position.backend == "webgpu"}

    @contextmanager
    def session(self, options: WebOptions, preflight: Preflight) -> Iterator[dict[str, Any]]:
        from deploytool.runtimes.web_session import web_session  # loaded when a run uses the browser

        with web_session() as shared:  # launches Chromium when the first row asks for it
            yield {"session": shared}

    def runtime_options(self, options: WebOptions, settings: RunSettings, position: Position) -> dict[str, Any]:
        return {**super().runtime_options(options, settings, position), "backend": position.backend}

    def resource(self, position: Position) -> str:
        return "chromium"

    def local_resources(self, browsers: int = 1) -> dict[str, float]:
        try:
            find_chromium()
            check_harness()
        except Exception:  # no browser here is a resource this worker lacks, not an error
            return {}
        return {"chromium": max(1, browsers)}

    def reproduce_args(self, options: WebOptions, position: Position) -> list[str]:
        return ["--backend", position.backend]

    def runs_on(self, environment: dict[str, Any], position: Position) -> str:
        runtime = super().runs_on(environment, position)
        runtime = "the browser" if runtime == self.name else runtime
        backend = environment.get("backend") or position.backend
        if backend == "webgpu" and environment.get("gpu"):
            backend += f" on {environment['gpu']}"
        return f"{runtime} ({backend}) in Chromium {environment.get('browser_version', '')}".rstrip()

