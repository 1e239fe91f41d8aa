"""The command-line face of each target: its flags, which of them were given, and the options they set. Kept
apart from the targets' machinery (a browser's, a phone's) so that building the command line imports none of it:
the built-in targets declare their flags here and `deploytool.targets.target_flags` offers them before the target
itself is loaded. A target's class inherits its flags (`class WebTarget(WebFlags, Target[WebOptions])`); a plugin's
target simply overrides the three methods it inherits from `TargetFlags` through `Target`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, ClassVar

from deploytool.errors import UnknownOption
from deploytool.runtimes.web_backends import BACKENDS, FORMAT_BACKENDS

DELEGATES = ("cpu", "xnnpack", "gpu", "nnapi")  # the Android target's --delegate


class TargetFlags:
    """A target without flags of its own (the base of every target's)."""

    name: ClassVar[str] = ""
    selectable: ClassVar[bool] = True  # offered to --target (the PC baseline is not)

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        """Flags this target adds to `deploytool migrate`."""

    def flags_given(self, args: argparse.Namespace) -> list[str]:
        """This target's own flags the user gave (a flag of a target not asked for is a mistake)."""
        return []

    def options_from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        """This target's options from parsed flags (only what the user can set)."""
        return {}


class PcFlags(TargetFlags):
    name = "pc"
    selectable = False


class HostFlags(TargetFlags):
    name = "host"


class WebFlags(TargetFlags):
    name = "web"

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--backend", default=None,
                            help=f"web: backends {', '.join(BACKENDS)} (TF.js: all of them; onnxruntime-web: "
                                 f"{', '.join(FORMAT_BACKENDS['onnx'])}; tfjs-tflite: wasm), or one library's: "
                                 "tfjs:webgpu, ort:webgpu (comma-separated or all; default: wasm)")

    def options_from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        if args.backend is not None and not args.backend.strip():
            raise UnknownOption("--backend is empty; name a backend (wasm, cpu, webgl, webgpu) or leave the flag out")
        return {"backends": (args.backend,)} if args.backend is not None else {}

    def flags_given(self, args: argparse.Namespace) -> list[str]:
        return ["--backend"] if getattr(args, "backend", None) is not None else []


class AndroidFlags(TargetFlags):
    name = "android"

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--device", action="append", default=[],
                            help="android: a serial, model:MODEL, abi:ABI or every (repeatable); "
                                 "default $ANDROID_SERIAL or every ready device")
        parser.add_argument("--delegate", default="cpu", help=f"android: {', '.join(DELEGATES)} (default: cpu)")
        parser.add_argument("--benchmark-model", type=Path, default=None,
                            help="android: TFLite's benchmark_model for the device's ABI (or $DEPLOYTOOL_BENCHMARK_MODEL)")

    def flags_given(self, args: argparse.Namespace) -> list[str]:
        return [f for f, given in (("--device", getattr(args, "device", None)),
                                   ("--benchmark-model", getattr(args, "benchmark_model", None))) if given]

    def options_from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"devices": tuple(args.device), "delegate": args.delegate,
                "benchmark_binary": str(args.benchmark_model) if args.benchmark_model else None}


__all__ = ["DELEGATES", "AndroidFlags", "HostFlags", "PcFlags", "TargetFlags", "WebFlags"]
