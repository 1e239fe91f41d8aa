"""The Android target end to end: AndroidRuntime and deploytool.devices.adb
through adbutils and the REAL adb server (private, on a free port, with its own
HOME), against the ADB device simulator and the benchmark_model test double in
tests/android_sim (no phone exists here). Models are tiny real TFLite files."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from deploytool.data.feed import Feed
from deploytool.artifact import Artifact
from deploytool.devices import adb
from deploytool.errors import DeviceError, DeviceNotFound, HarnessMissing, StageFailed
from deploytool.modelfiles.tflite_io import read_io
from deploytool.runtimes.android import AndroidRuntime, check_binary_abi
from tests.android_sim import BENCHMARK_MODEL_DOUBLE, DeviceSimulator, wait_for_state
from tests.android_sim.adbd import DEFAULT_PROPS

pytestmark = pytest.mark.android

ADB = "/usr/bin/adb"
FAST = dict(timeout_s=60, latency_runs=3, warmup_runs=2, warmup_min_secs=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int, home: Path) -> None:
    env = dict(os.environ, HOME=str(home), TMPDIR=str(home), ANDROID_ADB_SERVER_PORT=str(port))
    subprocess.run([ADB, "-P", str(port), "start-server"], env=env, check=True, capture_output=True, timeout=30)


def _kill_server(port: int) -> None:
    subprocess.run([ADB, "-P", str(port), "kill-server"], capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def adb_server():
    """A private adb server: tests never touch the user's server or keys."""
    home = Path(tempfile.mkdtemp(prefix="adbhome-"))
    port = _free_port()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANDROID_ADB_SERVER_PORT", str(port))
        mp.setenv("HOME", str(home))
        mp.setenv("ADBUTILS_ADB_PATH", ADB)
        mp.delenv("ANDROID_SERIAL", raising=False)
        mp.delenv("DEPLOYTOOL_BENCHMARK_MODEL", raising=False)
        _start_server(port, home)
        from adbutils import AdbClient

        try:
            yield AdbClient(port=port)
        finally:
            _kill_server(port)
            shutil.rmtree(home, ignore_errors=True)


def attach(client, sim: DeviceSimulator, state: str = "device") -> DeviceSimulator:
    sim.start()
    try:
        client.connect(sim.serial, timeout=1.5)
    except Exception:
        pass  # an offline phone never finishes the handshake, so `connect` waits
    wait_for_state(client, sim.serial, (state,))
    return sim


@pytest.fixture(scope="module")
def phone(adb_server):
    sim = attach(adb_server, DeviceSimulator())
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from tests.android_sim.models import build

    return build(tmp_path_factory.mktemp("models"))


def artifact(path: Path) -> Artifact:
    return Artifact(path=path, format="tflite", framework="keras", layout="NHWC", input_shape=(8, 8, 1),
                    num_outputs=10)


def host_outputs(path: Path, x: np.ndarray, per_sample: bool = False) -> np.ndarray:
    """The same model in LiteRT on the host, quantizing and dequantizing by hand."""
    from ai_edge_litert.interpreter import Interpreter

    from deploytool.modelfiles.tflite_io import read_io

    (tin,), (tout,) = read_io(str(path))
    it = Interpreter(model_path=str(path))
    d_in, d_out = it.get_input_details()[0], it.get_output_details()[0]
    chunks = [x[i : i + 1] for i in range(len(x))] if per_sample else [x]
    outs = []
    for chunk in chunks:
        if not per_sample:
            it.resize_tensor_input(d_in["index"], list(chunk.shape))
        it.allocate_tensors()
        it.set_tensor(d_in["index"], tin.quantize(chunk))
        it.invoke()
        outs.append(tout.dequantize(it.get_tensor(d_out["index"])))
    return np.concatenate(outs).reshape(len(x), -1)


def run_on(sim: DeviceSimulator, art: Artifact, x: np.ndarray, **options):
    rt = AndroidRuntime(serial=sim.serial, **{"benchmark_binary": str(BENCHMARK_MODEL_DOUBLE), **FAST, **options})
    with rt:
        rt.load(art)
        return rt.run(Feed.one("input", x))


def run_dirs(sim: DeviceSimulator) -> list[str]:
    return [p for p in sim.listing() if "/deploytool/run-" in p]


# ---- devices ----------------------------------------------------------------

def test_device_facts_and_table(phone):
    info = next(d for d in adb.describe_devices() if d.serial == phone.serial)
    assert info.ready and info.state == "device"
    assert (info.model, info.manufacturer) == (DEFAULT_PROPS["ro.product.model"], "deploytool-tests")
    assert (info.soc, info.board) == ("SIM8000", "simboard")
    assert (info.android_version, info.sdk, info.abi) == ("14", 34, "arm64-v8a")
    assert info.abilist == ("arm64-v8a", "armeabi-v7a", "armeabi")
    assert info.cpu_cores == 8 and info.ram_bytes == 7_813_528 * 1024
    table = adb.format_device_table([info])
    row = next(line for line in table.splitlines() if line.startswith(phone.serial))
    for word in ("device", "yes", "SIM8000", "arm64-v8a", "34", "7.5 GiB"):
        assert word in row
    assert adb.format_device_table([]) == adb.NO_DEVICE


def test_shell_quotes_every_argument(phone):
    dev = adb.AndroidDevice(phone.serial)
    r = dev.shell(["echo", "$(cd; touch pwned)", ";", "exit", "7"], timeout_s=10)
    assert r.exit_code == 0
    assert r.stdout.strip() == "$(cd; touch pwned) ; exit 7"
    assert not (phone.home / "pwned").exists()
    r = dev.shell(["sh", "-c", "exit 3"], timeout_s=10)
    assert r.exit_code == 3
    t0 = time.monotonic()
    r = dev.shell(["sleep", "30"], timeout_s=1)
    assert r.timed_out and time.monotonic() - t0 < 10
    with pytest.raises(ValueError):
        dev.remove("/data/local/tmp/other")


def test_push_pull_and_binary_reuse(phone, tmp_path):
    dev = adb.AndroidDevice(phone.serial)
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(300_000))
    remote, pushed = dev.ensure_file(blob, f"{adb.DEVICE_ROOT}/bin", "blob.bin")
    assert pushed and dev.file_sha256(remote) is not None
    assert dev.ensure_file(blob, f"{adb.DEVICE_ROOT}/bin", "blob.bin") == (remote, False)
    back = tmp_path / "back.bin"
    dev.pull(remote, back)
    assert back.read_bytes() == blob.read_bytes()
    with pytest.raises(DeviceError, match="does not exist"):
        dev.pull(f"{adb.DEVICE_ROOT}/nope.bin", back)


def test_select_by_serial_env_and_all(adb_server, phone, monkeypatch):
    second = attach(adb_server, DeviceSimulator())
    try:
        assert adb.select_devices(phone.serial) == [phone.serial]
        with pytest.raises(DeviceError, match="choose one with --device SERIAL or ANDROID_SERIAL"):
            adb.select_devices()
        assert {phone.serial, second.serial} <= set(adb.select_devices(all_devices=True))
        monkeypatch.setenv("ANDROID_SERIAL", second.serial)
        assert adb.select_devices() == [second.serial]
        with pytest.raises(DeviceNotFound, match="'127.0.0.1:1' is not attached.*adb devices"):
            adb.select_devices("127.0.0.1:1")
    finally:
        second.stop()


def test_unauthorized_and_offline_devices(adb_server, models):
    locked = attach(adb_server, DeviceSimulator(mode="unauthorized"), "unauthorized")
    asleep = attach(adb_server, DeviceSimulator(mode="offline"), "offline")
    try:
        infos = {d.serial: d for d in adb.describe_devices()}
        assert not infos[locked.serial].ready and "Allow USB debugging" in infos[locked.serial].problem
        assert not infos[asleep.serial].ready and "offline" in infos[asleep.serial].problem
        table = adb.format_device_table(list(infos.values()))
        assert f"{locked.serial}  unauthorized  no" in table
        with pytest.raises(DeviceError, match="unauthorized: unlock the phone"):
            adb.select_devices(locked.serial)
        with pytest.raises(DeviceError, match="is offline: reconnect"):
            AndroidRuntime(serial=asleep.serial, benchmark_binary=str(BENCHMARK_MODEL_DOUBLE)).load(artifact(models.fp32))
    finally:
        locked.stop()
        asleep.stop()


def test_no_device_and_no_server(monkeypatch, tmp_path, models):
    port = _free_port()
    _start_server(port, tmp_path)  # a second private server with nothing attached
    try:
        monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(port))
        monkeypatch.setenv("HOME", str(tmp_path))
        assert adb.describe_devices() == []
        with pytest.raises(DeviceNotFound) as e:
            adb.select_devices()
        assert str(e.value) == "no Android device attached: connect one and check `adb devices`"
        with pytest.raises(DeviceNotFound, match="no Android device attached"):
            AndroidRuntime(benchmark_binary=str(BENCHMARK_MODEL_DOUBLE)).load(artifact(models.fp32))
    finally:
        _kill_server(port)
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(_free_port()))
    monkeypatch.setenv("ADBUTILS_ADB_PATH", str(tmp_path / "no-such-adb"))
    with pytest.raises(DeviceNotFound, match="ADBUTILS_ADB_PATH"):
        adb.describe_devices()


# ---- the runtime: happy paths ----------------------------------------------

def test_fp32_whole_test_set_in_one_batch(phone, models):
    x = models.x_test
    out = run_on(phone, artifact(models.fp32), x, threads=2)
    want = host_outputs(models.fp32, x)
    assert out.outputs.shape == (len(x), 10)
    np.testing.assert_allclose(out.outputs, want, atol=1e-5)
    assert (out.outputs.argmax(1) == models.keras_probs.argmax(1)).mean() == 1.0
    env = out.environment
    assert env["accuracy_batch_size"] == len(x)
    assert env["device_model"] == DEFAULT_PROPS["ro.product.model"] and env["device_abi"] == "arm64-v8a"
    assert env["device_cpu_cores"] == 8 and env["device_sdk"] == 34
    assert env["delegate"] == "xnnpack" and env["delegate_applied"] == "full" and env["threads"] == 2
    assert env["benchmark_binary_kind"] == "script" and len(env["benchmark_binary_sha256"]) == 64
    assert env["benchmark_binary_version"]
    batch_cmd = next(c for c in phone.command_log if " batches " in c and models.fp32.name in c)
    assert f"--input_layer_shape={len(x)},8,8,1" in batch_cmd and "--num_threads=2" in batch_cmd
    # latency: separate batch-1 runs after warm-up, real numbers from the double
    assert out.latency_ms.shape == (3,) and (out.latency_ms > 0).all()
    assert out.latency.n == 3 and out.latency.p50_ms > 0
    assert out.load_ms > 0 and out.first_inference_ms > 0 and out.throughput_sps > 0
    # the phone's own load just before the latency runs (its /proc/stat, read twice in one shell), against
    # the phone's CPUs: the lab judges the row's latency against it as a host row's
    assert 0.0 <= env["cpu_busy_fraction_before_timing"] <= 1.0 and env["cpu_count"] == 8
    stat = [i for i, c in enumerate(phone.command_log) if "/proc/stat" in c]
    latency = [i for i, c in enumerate(phone.command_log) if " repeat " in c]
    assert len(stat) == 1 and stat[0] < latency[0]
    # memory: each figure named for what it measured
    assert out.memory_bytes["device_process_peak_rss_bytes"] > 10 * 2**20
    assert out.memory_bytes["tflite_reported_peak_footprint_bytes"] > 10 * 2**20
    assert run_dirs(phone) == []


def test_int8_io_quantized_in_and_dequantized_out(phone, models):
    x = models.x_test
    fp32 = host_outputs(models.fp32, x)
    out = run_on(phone, artifact(models.int8), x)
    np.testing.assert_allclose(out.outputs, host_outputs(models.int8, x), atol=1e-6)
    assert out.outputs.dtype == np.float32 and 0.0 <= out.outputs.min() and out.outputs.max() <= 1.0
    acc_int8 = (out.outputs.argmax(1) == models.y_test).mean()
    acc_fp32 = (fp32.argmax(1) == models.y_test).mean()
    assert abs(acc_int8 - acc_fp32) <= 0.02
    # the phone got int8 bytes: one byte per pixel
    batch_cmd = next(c for c in phone.command_log if " batches " in c and models.int8.name in c)
    assert f" batches 1 {len(x) * 64} " in batch_cmd
    # the binary was pushed once and reused by the later runs
    assert out.environment["benchmark_binary_pushed"] is False
    assert sum(p.endswith("/benchmark_model") for p in phone.pushed) == 1
    assert run_dirs(phone) == []


def accuracy_runs(sim: DeviceSimulator, since: int) -> list[str]:
    """The benchmark_model processes of accuracy passes (they write outputs) started after run `since`."""
    return [r for r in sim.benchmark_runs()[since:] if "--output_filepath=" in r]


def test_fixed_batch_model_runs_its_batch_twin_in_few_processes(phone, models):
    """A batch of 1 baked into Reshapes: the accuracy pass runs the checked batch-N twin, N samples per
    benchmark_model process (25 here: 60 samples take 3), and latency still runs the batch-1 file."""
    x = models.x_test[:60]
    before = len(phone.benchmark_runs())
    out = run_on(phone, artifact(models.fixed_batch), x, max_batch=25)
    np.testing.assert_allclose(out.outputs, host_outputs(models.fixed_batch, x, per_sample=True), atol=1e-5)
    runs = accuracy_runs(phone, before)
    assert len(runs) == 3 and all("--input_layer_shape=25,8,8,1" in r and "--graph=twin_b25_" in r for r in runs)
    latency = [r for r in phone.benchmark_runs()[before:] if "--output_filepath=" not in r]
    assert len(latency) == FAST["latency_runs"]
    assert all(f"--graph={models.fixed_batch.name} " in r and "--input_layer_shape=1,8,8,1" in r for r in latency)
    assert out.environment["accuracy_batch_size"] == 25
    assert out.environment["accuracy_model"] == f"batch-25 twin of {models.fixed_batch.name}"
    assert any("batch-25 twin" in n and "latency ran on the batch-1 file" in n for n in out.notes)
    assert run_dirs(phone) == []


def test_fixed_batch_model_whose_twin_fails_its_check_runs_one_sample_per_run(phone, models, monkeypatch):
    from deploytool.runtimes import tflite_twin

    monkeypatch.setattr(tflite_twin, "check_twin", lambda *a: "its outputs differ (forced by the test)")
    x = models.x_test[:6]
    before = len(phone.benchmark_runs())
    out = run_on(phone, artifact(models.fixed_batch), x)
    np.testing.assert_allclose(out.outputs, host_outputs(models.fixed_batch, x, per_sample=True), atol=1e-5)
    assert out.environment["accuracy_batch_size"] == 1 and "accuracy_model" not in out.environment
    assert any("twin was not used (its outputs differ (forced by the test))" in n for n in out.notes)
    assert any("could not be resized to a batch of 6" in n for n in out.notes)
    assert len(accuracy_runs(phone, before)) == 1 + len(x)  # the refused batch of 6, then one per sample
    assert run_dirs(phone) == []


def test_pytorch_born_int8_model_takes_one_accuracy_process(phone):
    """litert-torch's real int8 LeNet-like model (batch 1 fixed by its flatten): one accuracy process for
    the whole set instead of one per sample, with the batch-1 file's own outputs."""
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    try:
        art = cache.converted("torch", "tflite", "int8")
    finally:
        cache.close()
    x = cache.inputs(art, 40)
    before = len(phone.benchmark_runs())
    out = run_on(phone, art, x)
    (tin,), _ = read_io(str(art.path))
    assert tin.shape == (1, 1, 8, 8) and tin.dtype == "int8"  # batch 1, NCHW, int8 in
    np.testing.assert_allclose(out.outputs, host_outputs(art.path, x, per_sample=True), atol=1e-6)
    assert len(accuracy_runs(phone, before)) == 1 and out.environment["accuracy_batch_size"] == 40


def test_file_names_cannot_inject_commands(phone, models, tmp_path):
    evil = tmp_path / "m;cd;touch pwned;$(cd;touch pwned2).tflite"
    shutil.copy(models.fp32, evil)
    x = models.x_test[:5]
    out = run_on(phone, artifact(evil), x)
    np.testing.assert_allclose(out.outputs, host_outputs(models.fp32, x), atol=1e-5)
    assert not (phone.home / "pwned").exists() and not (phone.home / "pwned2").exists()
    assert not list(phone.root.rglob("pwned*"))
    assert any("'--graph=m;cd;touch pwned;$(cd;touch pwned2).tflite'" in c for c in phone.command_log)


def test_peak_rss_from_vmhwm_when_toybox_has_no_time(adb_server, models):
    sim = attach(adb_server, DeviceSimulator(toybox_time=False))
    try:
        out = run_on(sim, artifact(models.fp32), models.x_test[:4], latency_runs=2)
        assert out.memory_bytes["device_process_vmhwm_polled_bytes"] > 10 * 2**20
        assert "device_process_peak_rss_bytes" not in out.memory_bytes
        assert "VmHWM" in out.environment["device_peak_rss_method"]
    finally:
        sim.stop()


# ---- the runtime: faults -----------------------------------------------------

def test_refused_delegate_is_a_result(phone, models):
    with pytest.raises(StageFailed) as e:
        run_on(phone, artifact(models.fp32), models.x_test[:4], delegate="gpu")
    assert e.value.status == "delegate_refused"
    assert "GPU" in e.value.reason and phone.serial in e.value.reason
    assert run_dirs(phone) == []


def test_device_vanishes_mid_run(adb_server, models):
    sim = attach(adb_server, DeviceSimulator())
    sim.vanish_during(" batches ", after_s=0.0)
    try:
        t0 = time.monotonic()
        with pytest.raises(StageFailed) as e:
            run_on(sim, artifact(models.fp32), models.x_test[:8])
        assert e.value.status == "device_lost"
        assert sim.serial in e.value.reason and "adb devices" in e.value.reason
        assert time.monotonic() - t0 < 30
        # the phone's side of the run is gone too: killed with the cable, then reaped by the simulator's shell
        # thread, which may not have got there yet when the host side has already given up (a race under load)
        reaped = time.monotonic() + 10
        while sim._procs and time.monotonic() < reaped:
            time.sleep(0.05)
        assert not sim._procs
    finally:
        sim.stop()


def _script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


@pytest.mark.parametrize("free_kib, what", [(1024, "the model"), (16 * 1024 + 256, "the test set")])
def test_a_phone_without_room_is_refused_before_the_push_and_triaged_as_the_devices_state(phone, models, free_kib,
                                                                                         what):
    """The phone's own `df` (a script the simulator's shell finds first on its PATH) says how much is free in
    /data/local/tmp: too little for the model, or for the test set beside it, refuses the row in one line before
    anything of it is pushed, and triage calls it the device's state, never a library's bug."""
    from deploytool.bugs.triage import installed_environment, triage
    from deploytool.errors import PHONE_STORAGE_FULL
    from deploytool.result import Combo, Result, Status

    df = phone.bin / "df"
    df.write_text("#!/bin/sh\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
                  f"echo '/dev/block/dm-5 1000000 990000 {free_kib} 99% /data'\n")
    df.chmod(0o755)
    # the model and the run's margin (16 MiB) fit in 16.25 MiB; 16,000 samples of 8x8x1 int8 (1 MiB) beside them do not
    x = np.resize(models.x_test, (16000, *models.x_test.shape[1:]))
    with pytest.raises(StageFailed) as e:
        run_on(phone, artifact(models.int8), x)
    assert e.value.status == "runtime_failed" and PHONE_STORAGE_FULL in e.value.reason, e.value.reason
    assert what in e.value.reason and f"{free_kib / 1024:.0f} MiB free" in e.value.reason and "\n" not in e.value.reason
    pushed = [p for p in phone.listing() if "/deploytool/run-" in p and p.endswith((".tflite", ".bin"))]
    assert pushed == [] if what == "the model" else all(p.endswith(".tflite") for p in pushed), pushed
    row = Result(run_id="r", combo_key="k", model="m", dataset="d", combo=Combo("keras", "tflite", "int8", "android"),
                 status=Status.RUNTIME_FAILED, reason=e.value.reason)
    assert triage(row, installed_environment()).klass == "environment"


def test_non_zero_exit_is_a_result(phone, models, tmp_path):
    crash = _script(tmp_path, "crashing_benchmark_model",
                    'echo "INFO: STARTING!"\necho "ERROR: simulated crash in the op kernel" >&2\nkill -SEGV $$\n')
    with pytest.raises(StageFailed) as e:
        run_on(phone, artifact(models.fp32), models.x_test[:4], benchmark_binary=str(crash))
    assert e.value.status == "runtime_failed"
    assert "exited with code 139" in e.value.reason and "simulated crash" in e.value.reason
    assert run_dirs(phone) == []


def test_run_past_its_timeout_is_killed(phone, models, tmp_path):
    import psutil

    hang = _script(tmp_path, "hanging_benchmark_model", 'echo "INFO: STARTING!"\nexec sleep 31.4159\n')
    t0 = time.monotonic()
    with pytest.raises(StageFailed) as e:
        run_on(phone, artifact(models.fp32), models.x_test[:4], benchmark_binary=str(hang), timeout_s=2)
    assert e.value.status == "timeout" and "2 s limit" in e.value.reason
    assert time.monotonic() - t0 < 20
    time.sleep(0.2)
    assert not [p for p in psutil.process_iter(["cmdline"]) if "31.4159" in " ".join(p.info["cmdline"] or [])]
    assert run_dirs(phone) == []


def test_missing_binary_says_where_to_put_it(phone, models, monkeypatch, tmp_path):
    monkeypatch.delenv("DEPLOYTOOL_BENCHMARK_MODEL", raising=False)
    with pytest.raises(HarnessMissing) as e:
        AndroidRuntime(serial=phone.serial).load(artifact(models.fp32))
    assert "android_aarch64_benchmark_model" in str(e.value) and "DEPLOYTOOL_BENCHMARK_MODEL" in str(e.value)
    with pytest.raises(HarnessMissing, match="not found at"):
        AndroidRuntime(serial=phone.serial, benchmark_binary=str(tmp_path / "nope")).load(artifact(models.fp32))
    # a folder of prebuilt binaries: the device's ABI picks the file
    (tmp_path / "android_aarch64_benchmark_model").write_bytes(BENCHMARK_MODEL_DOUBLE.read_bytes())
    monkeypatch.setenv("DEPLOYTOOL_BENCHMARK_MODEL", str(tmp_path))
    rt = AndroidRuntime(serial=phone.serial, **FAST)
    with rt:
        rt.load(artifact(models.fp32))
        assert rt._env["benchmark_binary"].endswith("android_aarch64_benchmark_model")


def test_wrong_abi_binary_is_refused_before_it_is_pushed(phone, models, tmp_path):
    pushed_before = list(phone.pushed)
    with pytest.raises(StageFailed) as e:
        run_on(phone, artifact(models.fp32), models.x_test[:4], benchmark_binary="/bin/true")
    assert e.value.status == "wrong_abi"
    assert "x86-64" in e.value.reason and "arm64-v8a" in e.value.reason
    assert "android_aarch64_benchmark_model" in e.value.reason
    assert phone.pushed == pushed_before
    # an aarch64 ELF header passes the same check
    elf = bytearray(64)
    elf[:6] = b"\x7fELF\x02\x01"
    elf[18:20] = (183).to_bytes(2, "little")
    arm = tmp_path / "arm_benchmark_model"
    arm.write_bytes(bytes(elf))
    info = adb.AndroidDevice(phone.serial).describe()
    assert check_binary_abi(arm, info) == "ELF arm64 (aarch64)"
