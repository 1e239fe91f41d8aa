"""`deploytool migrate --target android --quantize int8` end to end through the
CLI, the real adb server and the device simulator (a TEST DOUBLE: no phone
exists here), with the benchmark_model double running real LiteRT inference."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.kept import conversions_kept
from tests.integration.test_android import BENCHMARK_MODEL_DOUBLE, adb_server, phone  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.android, pytest.mark.slow]


def test_no_device_exits_2_with_one_line(lenet5_workspace, adb_server):  # noqa: F811
    ws, *_ = lenet5_workspace
    r = run_cli("migrate", "--model", "lenet5", "--target", "android", "--quantize", "int8",
                "--workspace", str(ws.root), "--quiet")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "no Android device attached" in lines[0], r.stderr
    assert "adb devices" in lines[0]
    r = run_cli("migrate", "--model", "lenet5", "--target", "android", "--device", "no-such-phone",
                "--workspace", str(ws.root), "--quiet")
    assert r.returncode == 2 and "'no-such-phone' is not attached" in r.stderr


def test_migrate_lenet5_int8_on_the_simulated_phone(lenet5_workspace, phone):  # noqa: F811
    ws, *_ = lenet5_workspace
    r = run_cli("migrate", "--model", "lenet5", "--framework", "keras", "--target", "android", "--quantize", "int8",
                "--benchmark-model", str(BENCHMARK_MODEL_DOUBLE), "--latency-samples", "3", "--warmup", "2",
                "--workspace", str(ws.root), "--quiet", "--run-id", "android-int8")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(next((ws.root / "reports" / "android-int8").glob("report.json")).read_text())
    (row,) = report["results"]
    assert row["target"] == "android" and row["device"] == phone.serial and row["status"] == "measured"
    assert row["metrics"]["accuracy_delta_points"] >= -1.0 and row["metrics"]["agreement"] >= 0.98
    assert row["metrics"]["p50_ms"] > 0
    html = (ws.root / "reports" / "android-int8" / "report.html").read_text()
    # the device's facts are in the report's provenance
    assert phone.serial in html and "ADB simulator (deploytool test double)" in html and "SIM8000" in html




def test_devices_command_lists_the_phone_and_its_state(phone):  # noqa: F811
    r = run_cli("devices")
    assert r.returncode == 0, r.stderr
    assert phone.serial in r.stdout and "ADB simulator (deploytool test double)" in r.stdout
    assert "arm64-v8a" in r.stdout and "ready" in r.stdout.lower()


def test_missing_benchmark_model_is_one_line_exit_2(lenet5_workspace, phone, tmp_path):  # noqa: F811
    ws, *_ = lenet5_workspace
    r = run_cli("migrate", "--model", "lenet5", "--framework", "keras", "--target", "android", "--quantize", "int8",
                "--benchmark-model", str(tmp_path / "nowhere" / "benchmark_model"), "--workspace", str(ws.root),
                "--quiet", "--run-id", "android-no-binary")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "benchmark_model not found" in lines[0] and "android_harness/README.md" in lines[0]


def test_user_onnx_reaches_the_simulated_phone_as_tflite_through_onnx2tf(phone, tmp_path):  # noqa: F811
    """A user's .onnx has no Android runtime of its own: `--format tflite` converts it with onnx2tf, and the
    phone's row is compared as any other. (The conversion is kept between sessions, tests/kept.py: test_usermodel's
    onnx2tf test converts such a file in every session.)"""
    import numpy as np

    from tests.integration.test_usermodel import onnx_model

    model = onnx_model(tmp_path / "my.onnx", [None, 8, 8, 1])
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "test.npz", x=rng.random((32, 8, 8, 1), dtype=np.float32), y=rng.integers(0, 10, 32))
    ws = tmp_path / "ws"
    with conversions_kept(ws, "user-onnx"):
        r = run_cli("migrate", "--model", str(model), "--data", str(tmp_path / "test.npz"), "--format", "tflite",
                    "--quantize", "none", "--target", "android", "--benchmark-model", str(BENCHMARK_MODEL_DOUBLE),
                    "--latency-samples", "3", "--warmup", "1", "--workspace", str(ws), "--quiet", "--run-id",
                    "onnx-phone", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads((ws / "reports" / "onnx-phone" / "report.json").read_text())["results"]
    assert row["target"] == "android" and row["device"] == phone.serial and row["status"] == "measured", row
    assert row["artifact"]["converter"] == "onnx2tf" and row["metrics"]["agreement"] == 1.0, row
