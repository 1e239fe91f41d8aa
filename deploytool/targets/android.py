"""The Android target: .tflite models in TFLite's benchmark_model on phones
over ADB. Its axes are devices x delegate; its preflight finds the ready
devices (--device, else $ANDROID_SERIAL, else every ready one)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploytool.errors import UnknownOption
from deploytool.targets.base import Position, Preflight, RunSettings, Target, TargetOptions

DELEGATES = ("cpu", "xnnpack", "gpu", "nnapi")


@dataclass(frozen=True)
class AndroidOptions(TargetOptions):
    devices: tuple[str, ...] = ()  # serials; empty = $ANDROID_SERIAL or every ready device
    delegate: str = "cpu"
    benchmark_binary: str | None = None  # TFLite's benchmark_model for the device's ABI

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        if self.delegate not in DELEGATES:
            raise UnknownOption(f"unknown delegate {self.delegate!r}; choose from {', '.join(DELEGATES)}")
        if self.benchmark_binary:
            object.__setattr__(self, "benchmark_binary", str(Path(self.benchmark_binary).expanduser().absolute()))


class AndroidTarget(Target):
    name = "android"
    label = "Android over ADB"
    Options = AndroidOptions

    def add_cli_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--device", action="append", default=[],
                            help="android: a serial (repeatable); default $ANDROID_SERIAL or every ready device")
        parser.add_argument("--delegate", default="cpu", help="android: cpu, xnnpack, gpu, nnapi (default: cpu)")
        parser.add_argument("--benchmark-model", type=Path, default=None,
                            help="android: TFLite's benchmark_model for the device's ABI (or $DEPLOYTOOL_BENCHMARK_MODEL)")

    def options_from_cli(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"devices": tuple(args.device), "delegate": args.delegate,
                "benchmark_binary": str(args.benchmark_model) if args.benchmark_model else None}

    def positions(self, options: Any, preflight: Preflight, artifact_format: str) -> list[Position]:
        return [Position(device=d, backend=options.delegate) for d in preflight.devices]

    def preflight(self, options: Any, *, run: bool = True) -> Preflight:
        if not run:
            return Preflight(devices=tuple(options.devices))
        from deploytool.devices import adb

        if options.devices:
            serials = [s for serial in options.devices for s in adb.select_devices(serial)]
        else:
            serials = adb.select_devices(all_devices=True)
        return Preflight(devices=tuple(serials))

    def runtime_options(self, options: Any, settings: RunSettings, position: Position) -> dict[str, Any]:
        # benchmark_model prints summaries, not per-run times: each latency sample is its own run
        return {"serial": position.device, "delegate": position.backend, "threads": settings.threads,
                "benchmark_binary": options.benchmark_binary, "timeout_s": settings.timeout_s,
                "warmup_runs": settings.warmup_runs, "latency_runs": settings.latency_samples}

    def single_run_options(self, runtime_options: dict[str, Any]) -> dict[str, Any]:
        return {**runtime_options, "warmup_runs": 0, "latency_runs": 1}

    def lab_preflight(self, options: Any, resources: set[str]) -> Preflight:
        """The phones the lab's workers own (`android-<serial>`), narrowed by `devices` (serials; empty or "every":
        all of them). A serial named but owned by no worker stays: its cell is `no_worker` after the bounded wait,
        not silently left out of the night."""
        owned = sorted(r.removeprefix("android-") for r in resources if r.startswith("android-"))
        wanted = [d.removeprefix("serial:") for d in options.devices if d != "every"]
        if not wanted or "every" in options.devices:
            return Preflight(devices=tuple(owned))
        return Preflight(devices=tuple(wanted))

    def cell_options(self, options: dict[str, Any], device: str) -> dict[str, Any]:
        return {**options, "devices": [device]}  # the worker owns this phone; the lab's selectors named others too

    def resource(self, position: Position) -> str:
        return f"android-{position.device}"  # a phone runs one cell at a time, on the host it is plugged into

    def reproduce_args(self, options: Any, position: Position) -> list[str]:
        args = ["--device", position.device, "--delegate", position.backend]
        if options.benchmark_binary:
            args += ["--benchmark-model", str(options.benchmark_binary)]
        return args

    def runs_on(self, environment: dict[str, Any], position: Position) -> str:
        return f"benchmark_model on {environment.get('model') or position.device}"
