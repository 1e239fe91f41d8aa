"""The web target: TF.js and ONNX Runtime Web in headless Chromium. Its axis is
the TF.js backend (wasm, cpu, webgl) for TF.js graphs; ONNX and TFLite models
run on wasm. Rows are identified by the Chromium build they ran in. A run's
rows share one Chromium (its session), each in a fresh browser context."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from deploytool.devices.browser import chromium_build, find_chromium
from deploytool.devices.web_harness import check_harness
from deploytool.runtimes.web_session import WebSession
from deploytool.targets import expand
from deploytool.targets.base import Position, Preflight, RunSettings, Target, TargetOptions

BACKENDS = ("wasm", "cpu", "webgl")


@dataclass(frozen=True)
class WebOptions(TargetOptions):
    backends: tuple[str, ...] = ("wasm",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(expand(self.backends, BACKENDS, "web backend")))


class WebTarget(Target):
    name = "web"
    label = "headless Chromium"
    Options = WebOptions

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--backend", default="wasm",
                            help=f"web: TF.js backends {', '.join(BACKENDS)} (comma-separated or all; default: %(default)s)")

    def options_from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"backends": (args.backend,)}

    def positions(self, options: Any, preflight: Preflight, artifact_format: str) -> list[Position]:
        # TF.js graphs run on every chosen backend; ONNX Runtime Web and the TFLite harness run on wasm.
        backends = options.backends if artifact_format == "tfjs_graph" else ("wasm",)
        return [Position(backend=b) for b in backends]

    def preflight(self, options: Any, *, run: bool = True) -> Preflight:
        if not run:
            return Preflight()

        find_chromium()  # before anything runs: a missing browser is one line, not a column of failures
        check_harness()
        return Preflight(identity={"browser": chromium_build()})

    @contextmanager
    def session(self, options: Any, preflight: Preflight) -> Iterator[dict[str, Any]]:
        with WebSession() as shared:  # launches Chromium when the first row asks for it
            yield {"session": shared}

    def runtime_options(self, options: Any, settings: RunSettings, position: Position) -> dict[str, Any]:
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

    def reproduce_args(self, options: Any, position: Position) -> list[str]:
        return ["--backend", position.backend]

    def runs_on(self, environment: dict[str, Any], position: Position) -> str:
        runtime = super().runs_on(environment, position)
        runtime = "the browser" if runtime == self.name else runtime
        return (f"{runtime} ({environment.get('backend') or position.backend}) in Chromium "
                f"{environment.get('browser_version', '')}").rstrip()

