"""`AndroidRuntime`: a .tflite model on an Android device over ADB, run by
TFLite's official `benchmark_model` binary and the small driver in
android_harness/ (both pushed once per device and reused).

Accuracy: the whole test set goes to the phone as raw input batches (the input
resized with --input_layer_shape), and every output comes back through
--output_filepath, split by the output shapes known on the host. A model whose
batch of 1 is baked into a Reshape (PyTorch-born) runs its checked batch-N
twin instead (tflite_twin.py); a model that still cannot be resized falls back
to smaller batches, then to one sample per run.
Latency: separate batch-1 runs after warm-up. Memory: the tool's own peak
footprint and the process's peak RSS measured on the device, each named for
what it is. A fault in one combination (device gone, crash, timeout, refused
delegate, wrong ABI) becomes StageFailed after the device folder is cleaned up.
This module never compares outputs, stores results or talks to adbutils
directly (deploytool.devices.adb does).
"""

from __future__ import annotations

import math
import os
import re
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path
from dataclasses import fields
from typing import Any, Iterator, Mapping, Self

import numpy as np

from deploytool.artifact import Artifact, content_hash
from deploytool.devices import benchmark_output as bo
from deploytool.devices.adb import DEVICE_ROOT, AndroidDevice, DeviceInfo, DeviceLost, ShellResult, select_devices
from deploytool.errors import PHONE_STORAGE_FULL, DeviceError, HarnessMissing, StageFailed, UnknownOption
from deploytool.data.feed import Feed
from deploytool.modelfiles.signature import match_names
from deploytool.modelfiles.tflite_io import quantization_notes, read_io, tflite_tensors
from deploytool.runtimes import tflite_twin
from deploytool.runtimes.base import Outputs, Runtime, RuntimeOptions, check_file_inputs
from deploytool.runtimes.measure import LOAD_CHECK_S, busy_fraction_between, busy_note, load_environment
from deploytool.value import value

HARNESS_DIR = Path(__file__).resolve().parents[2] / "android_harness"
STORAGE_MARGIN_BYTES = 16 * 2**20  # room the run's own files take beside the model and the test set (outputs, logs)
DRIVER = HARNESS_DIR / "run_benchmark.sh"
ENV_BINARY = "DEPLOYTOOL_BENCHMARK_MODEL"
# Between the two readings of the phone's /proc/stat in one shell's output.
_STAT_MARK = "--deploytool-stat--"

DELEGATE_FLAGS = {
    "cpu": ["--use_xnnpack=false"],  # TFLite's built-in kernels, no delegate at all
    "xnnpack": ["--use_xnnpack=true"],
    "gpu": ["--use_gpu=true"],
    "nnapi": ["--use_nnapi=true"],
}

# ABI -> (ELF class, e_machine) and the name of TensorFlow's prebuilt binary.
ABI_ELF = {"arm64-v8a": (2, 183), "armeabi-v7a": (1, 40), "armeabi": (1, 40),
           "x86_64": (2, 62), "x86": (1, 3), "riscv64": (2, 243)}
ELF_NAMES = {(2, 183): "arm64 (aarch64)", (1, 40): "32-bit ARM", (2, 62): "x86-64", (1, 3): "x86",
             (2, 243): "riscv64"}
PREBUILT = {"arm64-v8a": "android_aarch64_benchmark_model", "armeabi-v7a": "android_arm_benchmark_model",
            "x86_64": "android_x86_64_benchmark_model", "x86": "android_x86_benchmark_model"}



@value
class AndroidOptions(RuntimeOptions):
    """What one row asks of benchmark_model on the phone. Checked: an unknown key or a value out of range is a
    typed one-line error naming it; a key given as None takes its default (as from the CLI)."""

    serial: str | None = None  # None: the one attached phone
    delegate: str = "xnnpack"  # one of DELEGATE_FLAGS
    threads: int | None = None  # None: benchmark_model's own default
    benchmark_binary: str | None = None  # a file, or a folder holding the prebuilt binaries (else $ENV_BINARY)
    timeout_s: float = 300.0  # per benchmark_model process
    warmup_runs: int = 10
    warmup_min_secs: float = 0.2
    latency_runs: int = 20  # timed runs at batch 1, each its own process
    max_batch: int = 1024  # the largest batch of the accuracy pass
    keep_device_files: bool = False

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> Self:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UnknownOption(f"unknown option(s) for the android runtime: {', '.join(unknown)}; "
                                f"known: {', '.join(OPTIONS)}")
        given = {k: v for k, v in options.items() if v is not None}
        return cls(**given)

    def __post_init__(self) -> None:
        def set_(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        set_("delegate", str(self.delegate).lower())
        if self.delegate not in DELEGATE_FLAGS:
            raise UnknownOption(f"unknown delegate {self.delegate!r}: choose one of {', '.join(DELEGATE_FLAGS)}")
        set_("threads", None if self.threads is None else int(self.threads))
        if self.threads is not None and self.threads < 1:
            raise UnknownOption(f"--threads must be 1 or more, got {self.threads}")
        set_("timeout_s", float(self.timeout_s))
        set_("warmup_runs", int(self.warmup_runs))
        set_("warmup_min_secs", float(self.warmup_min_secs))
        set_("latency_runs", max(1, int(self.latency_runs)))
        set_("max_batch", max(1, int(self.max_batch)))


# option -> default, the names a caller may pass (the sweep reads which batch option a runtime takes here)
OPTIONS = {f.name: f.default for f in fields(AndroidOptions)}

# The largest batch of a fixed-batch model's twin: 2,000 samples take 8 benchmark_model processes.
TWIN_MAX_BATCH = 256


def elf_machine(path: Path) -> tuple[int, int] | None:
    """(ELF class, e_machine) of an executable, or None when it is not ELF."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    endian = "<" if head[5] == 1 else ">"
    return head[4], struct.unpack(endian + "H", head[18:20])[0]


def check_binary_abi(path: Path, info: DeviceInfo) -> str:
    """What the binary is ("ELF arm64 (aarch64)" or "script"), or
    StageFailed("wrong_abi") when the device cannot run it."""
    machine = elf_machine(path)
    abis = info.abilist or ((info.abi,) if info.abi else ())
    if machine is not None:
        kind = ELF_NAMES.get(machine, f"ELF class {machine[0]} machine {machine[1]}")
        if abis and not any(ABI_ELF.get(a) == machine for a in abis):
            want = PREBUILT.get(abis[0], f"the {abis[0]} build")
            raise StageFailed("wrong_abi", f"{path.name} is built for {kind} but device {info.serial} runs "
                              f"{'/'.join(abis)}: use {want} (see android_harness/README.md)")
        return f"ELF {kind}"
    with open(path, "rb") as fh:
        if fh.read(2) == b"#!":
            return "script"
    raise StageFailed("wrong_abi", f"{path.name} is not an executable (no ELF header): "
                      "get benchmark_model as described in android_harness/README.md")


class AndroidRuntime(Runtime):
    name = "benchmark_model"  # its name in runtimes.REGISTRY (`--runtime benchmark_model`)
    owner = "google-ai-edge/LiteRT"
    dist = ""
    formats = ("tflite",)
    in_process = False
    Options = AndroidOptions
    options: AndroidOptions

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.device: AndroidDevice | None = None
        self.info: DeviceInfo | None = None
        self.run_dir: str | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._notes: list[str] = []
        self._env: dict[str, Any] = {}

    # ---- load ---------------------------------------------------------
    def _load(self, artifact: Artifact) -> None:
        try:
            self._in, self._out = read_io(str(artifact.path))
        except (ValueError, RuntimeError) as e:
            raise StageFailed("runtime_failed", f"LiteRT cannot read {artifact.path.name} on the host: {e}") from e
        self._bind(artifact)
        bad = [t.name for t in self._in if "," in t.name]
        if bad:
            raise StageFailed("unsupported", f"input name {bad[0]!r} contains ',' which "
                              "benchmark_model's --input_layer cannot express")
        explicit = self._explicit_binary()
        serial = select_devices(self.options.serial)[0]
        self.device = AndroidDevice(serial)
        self.info = self.device.describe()
        binary = explicit or self._default_binary(self.info)
        kind = check_binary_abi(binary, self.info)
        if not DRIVER.is_file():
            raise HarnessMissing(f"{DRIVER} is missing: run deploytool from its source tree "
                                 "(pip install -e .) so android_harness/ is available")
        self._tmp = tempfile.TemporaryDirectory(prefix="deploytool-android-")
        with self._device_faults("preparing the device"):
            self.bin_remote, pushed = self.device.ensure_file(binary, f"{DEVICE_ROOT}/bin", "benchmark_model")
            self.driver_remote, _ = self.device.ensure_file(DRIVER, f"{DEVICE_ROOT}/bin", "run_benchmark.sh", 0o644)
            self.run_dir = self.device.new_run_dir()
            self.model_name = artifact.path.name
            self._check_storage(artifact.path.stat().st_size, f"the model ({self.model_name})")
            self.device.push(artifact.path, f"{self.run_dir}/{self.model_name}")

        self._env = {
            **self.info.to_environment(),
            "runtime": "TFLite benchmark_model over adb",
            "benchmark_binary": str(binary),
            "benchmark_binary_sha256": content_hash(binary),
            "benchmark_binary_size_bytes": binary.stat().st_size,
            "benchmark_binary_kind": kind,
            "benchmark_binary_pushed": pushed,
            "delegate": self.options.delegate,
            "delegate_flags": " ".join(DELEGATE_FLAGS[self.options.delegate]),
            "threads": self.options.threads if self.options.threads is not None else "default",
        }

    def _bind(self, artifact: Artifact) -> None:
        """Which of the file's tensors (in its own order, as benchmark_model takes and writes them) is which of the
        artifact's named inputs and outputs (Artifact.signature; match_names pairs a model's one input and output
        whatever they are called), its inputs checked against the signature's (check_file_inputs)."""
        sig = artifact.signature
        named = tflite_tensors(str(artifact.path))
        try:
            ins = match_names(sig.input_names, list(named.inputs))
            outs = match_names(sig.output_names, list(named.outputs))
        except KeyError as e:
            raise StageFailed("load_failed", f"{artifact.path.name}: {e.args[0]}") from None
        check_file_inputs(sig, ins, {m: t.spec() for m, t in named.inputs.items()})
        by_tensor_in = {named.inputs[m].name: src for src, m in ins.items()}
        by_tensor_out = {named.outputs[m].name: src for src, m in outs.items()}
        self._sources = [by_tensor_in[t.name] for t in self._in]
        self._out_sources = [by_tensor_out[t.name] for t in self._out]

    def _explicit_binary(self) -> Path | None:
        """The binary named by option or env var; None when none is named or
        the name is a folder (then the ABI picks the file in it)."""
        given = self.options.benchmark_binary or os.environ.get(ENV_BINARY)
        if not given:
            return None
        path = Path(given).expanduser()
        if not path.exists():
            raise HarnessMissing(f"benchmark_model not found at {path}: download TensorFlow's prebuilt "
                                 "android_aarch64_benchmark_model (or build it), see android_harness/README.md")
        return None if path.is_dir() else path

    def _default_binary(self, info: DeviceInfo) -> Path:
        """A folder given by option/env, or android_harness/bin/, holding the
        prebuilt binary under TensorFlow's name for the device's ABI."""
        given = self.options.benchmark_binary or os.environ.get(ENV_BINARY)
        dirs = [Path(given).expanduser()] if given else []
        dirs.append(HARNESS_DIR / "bin")
        names = [PREBUILT[a] for a in (info.abilist or (info.abi,)) if a in PREBUILT] + ["benchmark_model"]
        for d in dirs:
            for n in names:
                if (d / n).is_file():
                    return d / n
        want = PREBUILT.get(info.abi, "benchmark_model")
        raise HarnessMissing(
            f"TFLite's benchmark_model for {info.abi or 'this device'} is not installed: download {want} "
            f"(https://storage.googleapis.com/tensorflow-nightly-public/prod/tensorflow/release/lite/tools/nightly/latest/{want}) "
            f"into {HARNESS_DIR / 'bin'}, or pass --benchmark-model PATH / set {ENV_BINARY}=PATH (android_harness/README.md)")

    # ---- what _load set up (the hooks below run only after it) ----------
    @property
    def _phone(self) -> AndroidDevice:
        assert self.device is not None, "load() first"
        return self.device

    @property
    def _phone_info(self) -> DeviceInfo:
        assert self.info is not None, "load() first"
        return self.info

    @property
    def _tmp_dir(self) -> Path:
        assert self._tmp is not None, "load() first"
        return Path(self._tmp.name)

    # ---- run ----------------------------------------------------------
    def _check_storage(self, need: int, what: str) -> None:
        """Refuse, before pushing, what the phone has no room for (with a margin for the run's own files)."""
        phone = self._phone
        free = phone.free_bytes(self.run_dir or DEVICE_ROOT)
        if free is not None and need + STORAGE_MARGIN_BYTES > free:
            raise StageFailed("runtime_failed", f"the phone {phone.serial} has {PHONE_STORAGE_FULL} for {what}: "
                              f"{free / 2**20:.0f} MiB free in {DEVICE_ROOT}, {need / 2**20:.0f} MiB needed (and "
                              f"{STORAGE_MARGIN_BYTES // 2**20} MiB for the run's own files); free space on the phone "
                              f"(adb -s {phone.serial} shell), or run fewer samples (--test-samples)")

    def _quantized(self, inputs: Feed) -> list[np.ndarray]:
        """Each input of the file, in its order, as its tensor takes it (int8 where it is quantized)."""
        return [t.quantize(inputs[src]) for t, src in zip(self._in, self._sources)]

    def _run(self, inputs: Feed) -> Outputs:
        try:
            q = self._quantized(inputs)
            n = len(q[0])
            out_bytes = n * sum(int(np.prod(o.shape[1:])) * np.dtype(o.dtype).itemsize for o in self._out)
            with self._device_faults("reading its free storage"):
                self._check_storage(sum(a.nbytes for a in q) + out_bytes, f"the test set ({n} samples)")
            flat, batch, throughput = self._accuracy(q)
            outputs, layout = self._as_row(self._named_outputs(flat))
            busy = self._phone_load()
            latency_ms, load_ms, first_ms, memory = self._latency([a[0:1] for a in q])
        except BaseException:
            self._cleanup()
            raise
        env = dict(self._env)
        env.update(accuracy_batch_size=batch, latency_runs=self.options.latency_runs, warmup_runs=self.options.warmup_runs,
                   warmup_min_secs=self.options.warmup_min_secs)
        info = self._phone_info
        env.update(load_environment(busy, info.cpu_cores))
        note = busy_note(busy, self.options.threads or 1, info.cpu_cores, where=f"the phone {info.serial}")
        notes = self._notes + ([note] if note else []) + [
            f"latency_ms: {self.options.latency_runs} timed runs at batch 1 on {info.serial}, each the single timed "
            f"run of its own benchmark_model process after {self.options.warmup_runs} warm-up runs",
            *quantization_notes(self._in, self._out),
        ]
        return Outputs(outputs=outputs, latency_ms=latency_ms, memory_bytes=memory, load_ms=load_ms,
                       first_inference_ms=first_ms, throughput_sps=throughput, environment=env, notes=notes,
                       output_layout=layout)

    def _named_outputs(self, flat: np.ndarray) -> Feed:
        """The file's outputs (side by side, in its order) by the source's names, in the source's order."""
        assert self.artifact is not None
        sig = self.artifact.signature
        parts, at = {}, 0
        for t, src in zip(self._out, self._out_sources):
            size = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else 1
            parts[src] = flat[:, at:at + size].reshape(len(flat), *t.shape[1:])
            at += size
        return Feed({name: parts[name] for name in sig.output_names})

    def _model_flags(self, batch: int, value_files: list[str], graph: str | None = None,
                     samples: list[np.ndarray] | None = None) -> list[str]:
        """benchmark_model's flags for the file's inputs, in its order: names, shapes at `batch` (a dimension the
        model leaves open takes the data's, from `samples`), one value file each."""
        given: list[np.ndarray | None] = list(samples) if samples else [None] * len(self._in)
        shapes = [(batch, *(s.shape[1:] if s is not None else t.shape[1:])) for t, s in zip(self._in, given)]
        pairs = [f"{t.name.replace(':', '::')}:{f}" for t, f in zip(self._in, value_files)]  # its escape for ':'
        flags = [f"--graph={graph or self.model_name}", f"--input_layer={','.join(t.name for t in self._in)}",
                 f"--input_layer_shape={':'.join(','.join(str(d) for d in s) for s in shapes)}",
                 f"--input_layer_value_files={','.join(pairs)}"]
        flags += DELEGATE_FLAGS[self.options.delegate]
        if self.options.threads is not None:
            flags.append(f"--num_threads={self.options.threads}")
        return flags

    def _batch_ladder(self, q: list[np.ndarray]) -> list[tuple[str, int]]:
        """(model file on the device, batch) to try in turn for the accuracy pass over `q` (one array per
        input; a batch twin only for a single input)."""
        n = len(q[0])
        declared = int(self._in[0].shape[0]) if self._in[0].shape else 1
        ladder = [min(n, self.options.max_batch), declared if 1 < declared <= n else 1, 1]
        batches = sorted(set(ladder), reverse=True)
        twin = self._batch_twin(q[0]) if batches[0] > 1 and len(q) == 1 else None
        if twin is not None:
            return [twin, (self.model_name, 1)]
        return [(self.model_name, b) for b in batches]

    def _batch_twin(self, q: np.ndarray) -> tuple[str, int] | None:
        """A model whose batch of 1 is baked in would take one benchmark_model process per sample: push its
        batch-N twin (runtimes/tflite_twin.py) for the accuracy pass, once the host has checked it."""
        assert self.artifact is not None
        path = self.artifact.path
        if not tflite_twin.needs_twin(path):
            return None
        batch = min(len(q), self.options.max_batch, TWIN_MAX_BATCH)
        local = self._tmp_dir / f"twin_b{batch}.tflite"
        try:
            twin = tflite_twin.make_twin(path, batch, local)
        except (ValueError, OSError) as e:
            self._notes.append(f"the model's batch of 1 is fixed and no batch-{batch} twin could be made ({e}): "
                               "the accuracy pass runs one sample per benchmark_model process")
            return None
        why = tflite_twin.check_twin(path, twin, q[:batch])
        if why:
            self._notes.append(f"the model's batch of 1 is fixed and its batch-{batch} twin was not used ({why}): "
                               "the accuracy pass runs one sample per benchmark_model process")
            return None
        name = f"twin_b{batch}_{self.model_name}"
        with self._device_faults("pushing the batch twin"):
            self._phone.push(local, f"{self.run_dir}/{name}")
        self._notes.append(
            f"the model's batch of 1 is fixed (a Reshape holds it), so the accuracy pass ran its batch-{batch} twin: "
            f"the same file with {twin.reshapes} Reshape target shape(s) and the input's batch set to {batch}, "
            f"checked on the host against the batch-1 file; latency ran on the batch-1 file itself")
        self._env["accuracy_model"] = f"batch-{batch} twin of {self.model_name}"
        return name, batch

    def _accuracy(self, q: list[np.ndarray]) -> tuple[np.ndarray, int, float | None]:
        n = len(q[0])
        ladder = self._batch_ladder(q)
        files = _files("inputs", len(q))
        for i, (graph, b) in enumerate(ladder):
            k = math.ceil(n / b)
            with self._device_faults("running the test set"):
                for a, name in zip(q, files):
                    padded = np.concatenate([a, np.zeros((k * b - n, *a.shape[1:]), a.dtype)]) if k * b > n else a
                    local = self._tmp_dir / name
                    padded.tofile(local)
                    self._phone.push(local, f"{self.run_dir}/{name}")
                args = ["sh", self.driver_remote, "batches", k, ",".join(str(b * a[0].nbytes) for a in q),
                        ",".join(files), "outputs.bin", _secs(self.options.timeout_s), "--", self.bin_remote,
                        *self._model_flags(b, _files("batch_in", len(q)), graph, q),
                        "--output_filepath=batch_out.bin", "--num_runs=1", "--min_secs=0",
                        "--warmup_runs=0", "--warmup_min_secs=0"]
                r = self._phone.shell(args, cwd=self.run_dir, timeout_s=k * (self.options.timeout_s + 5) + 10,
                                      what="running the test set")
            report = bo.parse(r.output)
            last_rung = i == len(ladder) - 1
            if r.exit_code != 0:
                if not last_rung and not r.timed_out and _resize_refused(report, r.output):
                    self._notes.append(f"the model could not be resized to a batch of {b} on the device "
                                       f"({report.first_error() or 'allocation failed'}): retried with batches of {ladder[i + 1][1]}")
                    continue
                raise self._failure(r, report, f"the test set in batches of {b}")
            self._check_delegate(report)
            local_out = self._tmp_dir / "outputs.bin"
            with self._device_faults("fetching the outputs"):
                self._phone.pull(f"{self.run_dir}/outputs.bin", local_out)
            raw = local_out.read_bytes()
            per_sample = [int(np.prod(o.shape[1:])) * np.dtype(o.dtype).itemsize for o in self._out]
            if len(raw) != k * b * sum(per_sample):
                if not last_rung:
                    self._notes.append(f"outputs at a batch of {b} did not scale with the batch "
                                       f"({len(raw)} bytes for {k * b} samples): retried with batches of {ladder[i + 1][1]}")
                    continue
                raise StageFailed("runtime_failed", f"benchmark_model wrote {len(raw)} output bytes for {k * b} "
                                  f"samples, expected {k * b * sum(per_sample)} from the model's output shapes")
            self._env["delegate_applied"] = _applied(report, self.options.delegate)
            throughput = b / (report.inference_avg_us / 1e6) if report.inference_avg_us else None
            return self._split_outputs(raw, k, b, n), b, throughput
        raise AssertionError("unreachable: the last rung returns or raises")

    def _split_outputs(self, raw: bytes, k: int, b: int, n: int) -> np.ndarray:
        per_output: list[list[np.ndarray]] = [[] for _ in self._out]
        off = 0
        for _ in range(k):
            for j, o in enumerate(self._out):
                dtype = np.dtype(o.dtype)
                count = b * int(np.prod(o.shape[1:]))
                arr = np.frombuffer(raw, dtype=dtype, count=count, offset=off).reshape(b, -1)
                per_output[j].append(o.dequantize(arr))
                off += count * dtype.itemsize
        cols = [np.concatenate(chunks)[:n] for chunks in per_output]
        return np.concatenate(cols, axis=1).astype(np.float32)

    def _phone_load(self) -> float | None:
        """What the phone's other processes took of its CPUs over LOAD_CHECK_S just before the latency runs
        (its /proc/stat, read twice in one shell): the lab judges a phone row's latency against it as a host
        row's. None when the phone does not say; that never fails the row."""
        script = f"cat /proc/stat; echo {_STAT_MARK}; sleep {LOAD_CHECK_S:g}; cat /proc/stat"
        try:
            r = self._phone.shell(["sh", "-c", script], timeout_s=10, what="reading the phone's CPU load")
        except DeviceError:  # a phone that cannot say keeps its row (a lost one fails at the latency runs)
            return None
        before, _, after = r.stdout.partition(_STAT_MARK)
        return busy_fraction_between(before, after) if r.exit_code == 0 else None

    def _latency(self, samples: list[np.ndarray]) -> tuple[np.ndarray, float | None, float | None, dict[str, float]]:
        files = _files("sample", len(samples))
        with self._device_faults("measuring latency"):
            for sample, name in zip(samples, files):
                local = self._tmp_dir / name
                sample.tofile(local)
                self._phone.push(local, f"{self.run_dir}/{name}")
            args = ["sh", self.driver_remote, "repeat", self.options.latency_runs, _secs(self.options.timeout_s), "--",
                    self.bin_remote, *self._model_flags(1, files, samples=samples), "--num_runs=1", "--min_secs=0",
                    f"--warmup_runs={self.options.warmup_runs}", f"--warmup_min_secs={self.options.warmup_min_secs:g}",
                    "--report_peak_memory_footprint=true"]
            r = self._phone.shell(args, cwd=self.run_dir,
                                  timeout_s=self.options.latency_runs * (self.options.timeout_s + 5) + 10, what="measuring latency")
        runs = [bo.parse(t) for t in bo.split_runs(r.stdout)]
        if r.exit_code != 0:
            raise self._failure(r, runs[-1] if runs else bo.parse(r.output), "the batch-1 latency runs")
        if len(runs) != self.options.latency_runs or not all(x.complete for x in runs):
            raise StageFailed("runtime_failed", f"benchmark_model's latency output on {self._phone_info.serial} is incomplete "
                              f"({sum(x.complete for x in runs)} of {self.options.latency_runs} runs reported timings)")
        for x in runs:
            self._check_delegate(x)
        latency_ms = np.array([_inference_us(x) / 1e3 for x in runs], dtype=np.float64)
        init = [x.init_us for x in runs if x.init_us is not None]
        first = [x.first_inference_us for x in runs if x.first_inference_us]
        memory: dict[str, float] = {}
        rss = [x.max_rss_kib for x in runs if x.max_rss_kib is not None]
        hwm = [x.vmhwm_kib for x in runs if x.vmhwm_kib]
        if rss:
            memory["device_process_peak_rss_bytes"] = float(max(rss) * 1024)
            self._env["device_peak_rss_method"] = "toybox time -v (Max RSS of the benchmark_model process)"
        elif hwm:
            memory["device_process_vmhwm_polled_bytes"] = float(max(hwm) * 1024)
            self._env["device_peak_rss_method"] = "VmHWM of the benchmark_model process, polled every 50 ms"
        peak = [x.peak_footprint_mb for x in runs if x.peak_footprint_mb is not None]
        if peak:
            memory["tflite_reported_peak_footprint_bytes"] = float(max(peak) * 2**20)
        overall = [x.footprint_delta_overall_mb for x in runs if x.footprint_delta_overall_mb is not None]
        if overall:
            memory["tflite_reported_footprint_delta_bytes"] = float(max(overall) * 2**20)
        version = next((x.version for x in runs if x.version), None)
        self._env["benchmark_binary_version"] = version or "not reported by the binary (see benchmark_binary_sha256)"
        return (latency_ms, float(np.median(init)) / 1e3 if init else None,
                float(np.median(first)) / 1e3 if first else None, memory)

    # ---- faults -------------------------------------------------------
    def _check_delegate(self, report: bo.BenchmarkReport) -> None:
        why = bo.delegate_refusal(report, self.options.delegate)
        if why:
            raise StageFailed("delegate_refused", f"{why} (device {self._phone_info.serial})")

    def _failure(self, r: ShellResult, report: bo.BenchmarkReport, what: str) -> StageFailed:
        serial = self._phone_info.serial
        if r.timed_out:
            return StageFailed("timeout", f"benchmark_model ran past its {_secs(self.options.timeout_s)} s limit on {serial} "
                               f"while running {what}; it was killed")
        why = bo.delegate_refusal(report, self.options.delegate)
        if why:
            return StageFailed("delegate_refused", f"{why} (device {serial})")
        out = r.output
        if r.exit_code == 126 or re.search(r"exec format error|not executable|cannot execute binary", out, re.I):
            return StageFailed("wrong_abi", f"device {serial} cannot execute benchmark_model "
                               f"(exit {r.exit_code}): {_last_line(out)}")
        detail = report.first_error() or _last_line(out) or "no output"
        return StageFailed("runtime_failed", f"benchmark_model exited with code {_exit_text(r.exit_code)} on "
                           f"{serial} while running {what}: {detail}")

    @contextmanager
    def _device_faults(self, what: str) -> Iterator[None]:
        """Device trouble in the middle of a combination becomes its result,
        after the run folder is removed (where the device still answers)."""
        try:
            yield
        except DeviceLost as e:
            self._cleanup()
            raise StageFailed("device_lost", f"{e} ({what})") from None
        except DeviceError as e:
            self._cleanup()
            raise StageFailed("runtime_failed", f"{e} ({what})") from None

    def _cleanup(self) -> None:
        """Remove this run's folder on the device (the binary stays for reuse)."""
        if self.device is not None and self.run_dir and not self.options.keep_device_files:
            run_dir, self.run_dir = self.run_dir, None
            try:
                self.device.remove(run_dir)
            except DeviceError as e:
                self._notes.append(f"could not remove {run_dir} from the device: {e}")
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _close(self) -> None:
        self._cleanup()


def _resize_refused(report: bo.BenchmarkReport, output: str) -> bool:
    return report.allocate_failed or bool(re.search(r"should have \d+ dimensions|It should be \d+ bytes|"
                                                    r"failed to prepare|ResizeInputTensor", output))


def _applied(report: bo.BenchmarkReport, delegate: str) -> str:
    name = {"gpu": "GPU", "nnapi": "NNAPI", "xnnpack": "XNNPACK"}.get(delegate)
    if name is None:
        return "none (built-in CPU kernels)"
    return report.delegate_applied.get(name, "not reported")


def _inference_us(report: bo.BenchmarkReport) -> float:
    """A complete run's batch-1 inference time: its statistics' average, else its summary's."""
    if report.inference and report.inference.avg_us is not None:
        return report.inference.avg_us
    assert report.inference_avg_us is not None  # what makes a report complete
    return report.inference_avg_us


def _exit_text(code: int) -> str:
    """139 -> "139 (killed by SIGSEGV)": the device's shell reports a signal as 128+N."""
    import signal

    if 128 < code < 128 + 65:
        try:
            return f"{code} (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return str(code)


def _files(stem: str, count: int) -> list[str]:
    """One value file per input on the device: `stem.bin` for one input (as ever), `stem_<j>.bin` for several."""
    return [f"{stem}.bin"] if count == 1 else [f"{stem}_{j}.bin" for j in range(count)]


def _secs(timeout_s: float) -> str:
    return str(max(1, int(math.ceil(timeout_s))))


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""
