"""A test double of a *target*, not of any real part: "fake" is a board that
runs ONNX models in the real onnxruntime but, like a buggy device runtime, adds
`offset` to every sample's first output. It shows that a new target is one
module plus a `register` call: the test registers it in-process, a subprocess
gets it with `DEPLOYTOOL_PLUGINS=tests.fake_target`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from deploytool import runtimes, targets
from deploytool.runtimes.base import Outputs
from deploytool.runtimes.onnxrt import OnnxRuntime, OnnxRuntimeOptions
from deploytool.targets import Position, Preflight, RunSettings, Target, TargetOptions


@dataclass(frozen=True)
class FakeTargetOptions(TargetOptions):
    offset: float = 100.0
    boards: tuple[str, ...] = ("board-a",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "boards", tuple(self.boards))


class FakeTarget(Target):
    name = "fake"
    label = "a fake board"
    Options = FakeTargetOptions

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--fake-offset", type=float, default=None, help="fake: what the board adds to output 0")

    def options_from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        return {} if args.fake_offset is None else {"offset": args.fake_offset}

    def positions(self, options: Any, preflight: Preflight, artifact_format: str) -> list[Position]:
        return [Position(device=b) for b in options.boards]

    def runtime_options(self, options: Any, settings: RunSettings, position: Position) -> dict[str, Any]:
        return {**super().runtime_options(options, settings, position), "offset": options.offset}

    def reproduce_args(self, options: Any, position: Position) -> list[str]:
        return ["--fake-offset", repr(options.offset)]


@dataclass(frozen=True)
class FakeRuntimeOptions(OnnxRuntimeOptions):
    offset: float = 0.0


class FakeRuntime(OnnxRuntime):
    name = "fake-ort"
    Options = FakeRuntimeOptions
    options: FakeRuntimeOptions

    def _run(self, inputs: Any) -> Outputs:
        out = super()._run(inputs)
        out.outputs[:, 0] += float(self.options.offset)
        out.environment.update(runtime="fake-ort", board="board-a")
        return out


def register() -> None:
    targets.register(FakeTarget())
    runtimes.register("fake", "onnx", "fake-ort", FakeRuntime)


def unregister() -> None:
    targets.unregister("fake")
    runtimes.unregister("fake")


register()
