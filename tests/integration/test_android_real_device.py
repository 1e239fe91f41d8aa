"""The Android target on a REAL phone. Runs only when DEPLOYTOOL_REAL_DEVICE
names the phone's serial (see android_harness/README.md); it uses the user's
adb server and the benchmark_model found by DEPLOYTOOL_BENCHMARK_MODEL or in
android_harness/bin/. Everywhere else it is skipped, with the reason."""

from __future__ import annotations

import os

import numpy as np
import pytest

SERIAL = os.environ.get("DEPLOYTOOL_REAL_DEVICE", "")

pytestmark = [
    pytest.mark.android,
    pytest.mark.real_device,
    pytest.mark.skipif(not SERIAL, reason="no real phone here: set DEPLOYTOOL_REAL_DEVICE=SERIAL (see `adb devices`) "
                       "and DEPLOYTOOL_BENCHMARK_MODEL to run on one"),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from tests.android_sim.models import build

    return build(tmp_path_factory.mktemp("models"), n_test=120)


def test_phone_is_ready_and_described():
    from deploytool.devices import adb

    info = next(d for d in adb.describe_devices() if d.serial == SERIAL)
    assert info.ready, info.problem
    assert info.model and info.abi and info.sdk and info.cpu_cores and info.ram_bytes
    assert SERIAL in adb.format_device_table([info])


@pytest.mark.parametrize("which", ["fp32", "int8"])
def test_runs_the_test_set_on_the_phone(models, which):
    from ai_edge_litert.interpreter import Interpreter

    from deploytool.artifact import Artifact
    from deploytool.modelfiles.tflite_io import read_io
    from deploytool.runtimes.android import AndroidRuntime

    path = getattr(models, which)
    art = Artifact(path=path, format="tflite", framework="keras", layout="NHWC", input_shape=(8, 8, 1), num_outputs=10)
    with AndroidRuntime(serial=SERIAL, latency_runs=5, timeout_s=120) as rt:
        rt.load(art)
        out = rt.run(models.x_test)
    (tin,), (tout,) = read_io(str(path))
    it = Interpreter(model_path=str(path))
    d_in = it.get_input_details()[0]
    it.resize_tensor_input(d_in["index"], list(models.x_test.shape))
    it.allocate_tensors()
    it.set_tensor(d_in["index"], tin.quantize(models.x_test))
    it.invoke()
    host = tout.dequantize(it.get_tensor(it.get_output_details()[0]["index"])).reshape(len(models.x_test), -1)
    # Different kernels on the phone: top-1 must agree, values within a small tolerance.
    assert (out.outputs.argmax(1) == host.argmax(1)).mean() >= 0.98
    assert np.abs(out.outputs - host).max() < (0.05 if which == "int8" else 1e-3)
    assert out.environment["device_serial"] == SERIAL and out.latency.n == 5 and out.latency.mean_ms > 0
    assert any(k.startswith("device_process_") for k in out.memory_bytes)
