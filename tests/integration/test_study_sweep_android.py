"""`deploytool study sweep --target android` through the real adb server, the device simulator and the
benchmark_model double (TEST DOUBLES: no phone exists here; the double runs real LiteRT inference): a 1-thread x
2-batch grid on LiteRT's own benchmark tool, each point's batches and latency runs as benchmark_model processes.
Cost: ~11 s at load 6 when the android group's lab tests (same worker, same workspace) have converted LeNet-5 to
TFLite already, as they do in collection order; ~29 s at load 9 run alone (the conversion included)."""

from __future__ import annotations

import pytest

from tests.integration.test_android import BENCHMARK_MODEL_DOUBLE, adb_server, phone  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.android, pytest.mark.slow]


def test_the_sweep_runs_each_point_on_the_simulated_phone(lenet5_workspace, phone):  # noqa: F811
    from deploytool.run.request import MigrateRequest
    from deploytool.study.sweep import sweep
    from deploytool.study.sweep_measure import PointBudget

    ws, *_ = lenet5_workspace
    req = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("all",), quantize=("none",),
                         targets=("android",), warmup_runs=1,
                         target_options={"android": {"devices": [phone.serial],
                                                     "benchmark_binary": str(BENCHMARK_MODEL_DOUBLE)}})
    out = sweep(req, {"threads": "1", "batch": "1,8"}, ("benchmark_model",), "infer",
                PointBudget(min_batches=2, min_samples=2), workspace=ws.root, progress=False, log=lambda s: None)
    unit = f"android:cpu@{phone.serial}/benchmark_model/keras-tflite"
    assert sorted(out.points) == [f"infer/{unit}/t1/b1", f"infer/{unit}/t1/b8"]
    for key, p in out.points.items():
        assert p["status"] == "measured", (key, p.get("reason"))
        assert p["samples"] == 2 * p["batch"]  # two batches, each its own benchmark_model process
        assert p["throughput_sps"] > 0 and p["environment"]["accuracy_batch_size"] == p["batch"]
        assert p["environment"]["threads"] == 1 and p["environment"]["device_serial"] == phone.serial
    one = out.points[f"infer/{unit}/t1/b1"]
    assert 0 < one["p50_ms_per_sample"] <= one["p90_ms_per_sample"]  # two batch-1 latency runs
    assert out.points[f"infer/{unit}/t1/b8"]["p50_ms_per_sample"] is None
