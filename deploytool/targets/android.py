"""The Android target: .tflite models in TFLite's benchmark_model on phones
over ADB. Its axes are devices x delegate; its preflight finds the ready
devices (--device selectors: a serial, model:, abi:, every; else
$ANDROID_SERIAL, else every ready one). In a lab, the workers tell each phone's
model and ABI, and the driver resolves the selectors from those facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deploytool.devices import selectors
from deploytool.errors import DeviceError, DeviceNotFound, UnknownOption
from deploytool.targets.base import Position, Preflight, RunSettings, Target, TargetOptions
from deploytool.targets.flags import DELEGATES, AndroidFlags
from deploytool.value import value



@value
class AndroidOptions(TargetOptions):
    devices: tuple[str, ...] = ()  # selectors (devices/selectors.py); empty = $ANDROID_SERIAL or every ready device
    delegate: str = "cpu"
    benchmark_binary: str | None = None  # TFLite's benchmark_model for the device's ABI

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        for selector in self.devices:
            selectors.parse(selector)  # an unknown kind is refused here, before anything runs
        if self.delegate not in DELEGATES:
            raise UnknownOption(f"unknown delegate {self.delegate!r}; choose from {', '.join(DELEGATES)}")
        if self.benchmark_binary:
            object.__setattr__(self, "benchmark_binary", str(Path(self.benchmark_binary).expanduser().absolute()))


class AndroidTarget(AndroidFlags, Target[AndroidOptions]):  # its name and flags: flags.AndroidFlags
    label = "Android over ADB"
    Options = AndroidOptions
    threads_on_worker = False

    def positions(self, options: AndroidOptions, preflight: Preflight, artifact_format: str) -> list[Position]:
        return [Position(device=d, backend=options.delegate) for d in preflight.devices]

    def preflight(self, options: AndroidOptions, *, run: bool = True) -> Preflight:
        if not run:
            return Preflight(devices=tuple(options.devices))

        # the ADB client (a socket, the device protocol) loads when a run asks for phones, not with the flags
        from deploytool.devices import adb

        kinds = {selectors.parse(d)[0] for d in options.devices}
        if not options.devices:
            serials = adb.select_devices(all_devices=True)
        elif kinds == {"serial"}:
            serials = [s for d in options.devices for s in adb.select_devices(selectors.parse(d)[1])]
        else:  # model:, abi:, every: chosen by the ready phones' facts
            phones = {i.serial: {"model": i.model, "abi": i.abi} for i in adb.describe_devices() if i.ready}
            got = selectors.resolve(options.devices, phones)
            if got.unmatched:
                raise DeviceNotFound(next(iter(got.unmatched.values())))
            serials = [x for s in got.serials for x in adb.select_devices(s)]  # a named serial must be ready too
        return Preflight(devices=tuple(serials))

    def runtime_options(self, options: AndroidOptions, settings: RunSettings, position: Position) -> dict[str, Any]:
        # benchmark_model prints summaries, not per-run times: each latency sample is its own run
        return {"serial": position.device, "delegate": position.backend, "threads": settings.threads,
                "benchmark_binary": options.benchmark_binary, "timeout_s": settings.timeout_s,
                "warmup_runs": settings.warmup_runs, "latency_runs": settings.latency_samples}

    def single_run_options(self, runtime_options: dict[str, Any]) -> dict[str, Any]:
        return {**runtime_options, "warmup_runs": 0, "latency_runs": 1}

    def lab_preflight(self, options: AndroidOptions, resources: dict[str, dict[str, str]]) -> Preflight:
        """The phones the lab's workers own (`android-<serial>`, with the model and ABI their workers told),
        narrowed by the `devices` selectors (empty or "every": all of them). A serial named but owned by no worker
        stays: its cell is `no_worker` after the bounded wait (a phone may be plugged in). A selector no phone
        matches stays too, as a device of its own that is unavailable: its cells are `no_worker` naming it."""
        phones = {r.removeprefix("android-"): facts for r, facts in resources.items() if r.startswith("android-")}
        got = selectors.resolve(options.devices, phones)
        return Preflight(devices=got.serials + tuple(got.unmatched), unavailable=dict(got.unmatched))

    def resource_facts(self, resources: set[str]) -> dict[str, dict[str, str]]:
        """The model and ABI of each phone this worker owns, from its properties (one getprop each)."""

        from deploytool.devices import adb

        facts = {}
        for r in sorted(resources):
            if not r.startswith("android-"):
                continue
            try:
                props = adb.AndroidDevice(r.removeprefix("android-")).getprops()
            except DeviceError:  # gone since it was advertised: selected by serial only
                continue
            abi = props.get("ro.product.cpu.abi", "") or props.get("ro.product.cpu.abilist", "").split(",")[0]
            facts[r] = {"model": props.get("ro.product.model", ""), "abi": abi}
        return facts

    def cell_options(self, options: dict[str, Any], device: str) -> dict[str, Any]:
        return {**options, "devices": [device]}  # the worker owns this phone; the lab's selectors named others too

    def resource(self, position: Position) -> str:
        return f"android-{position.device}"  # a phone runs one cell at a time, on the host it is plugged into

    def local_resources(self, browsers: int = 1) -> dict[str, float]:
        from deploytool.devices import adb

        try:
            return {f"android-{serial}": 1 for serial in adb.select_devices(all_devices=True)}
        except (DeviceNotFound, DeviceError, OSError):
            return {}

    def reproduce_args(self, options: AndroidOptions, position: Position) -> list[str]:
        args = ["--device", position.device, "--delegate", position.backend]
        if options.benchmark_binary:
            args += ["--benchmark-model", str(options.benchmark_binary)]
        return args

    def runs_on(self, environment: dict[str, Any], position: Position) -> str:
        return f"benchmark_model on {environment.get('model') or position.device}"
