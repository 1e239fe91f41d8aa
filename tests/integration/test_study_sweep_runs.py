"""`deploytool study sweep` on real runtimes: LeNet-5 (trained once by the session fixture) in PyTorch and, converted,
in onnxruntime at threads 1,2 x batch 1,8 in the measuring child, and one tiny PyTorch training point; every point
is stored with its numbers, the report renders from stored points, and the same request again measures nothing.
PyTorch only: each Keras child imports TensorFlow (~9 s of CPU), too dear for this tier; the full sweep pins
TensorFlow's threads per child and its report shows them."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

GRID = {"threads": "1,2", "batch": "1,8", "train_threads": "1", "train_batch": "64", "train_epochs": "2",
        "train_samples": "256", "target_accuracy": 0.5}


def _sweep(ws, part="infer"):
    from deploytool.run.request import MigrateRequest
    from deploytool.study.sweep import sweep
    from deploytool.study.sweep_measure import PointBudget

    req = MigrateRequest(model="lenet5", frameworks=("torch",), formats=("all",), quantize=("none",),
                         targets=("host",))
    return sweep(req, GRID, ("torch", "onnxruntime"), part, PointBudget(min_batches=3, min_samples=16, max_seconds=0.5),
                 workspace=ws.root, progress=False, log=lambda s: None)


def test_sweep_measures_every_point_then_resumes_without_measuring(lenet5_workspace):
    ws, spec, _, _ = lenet5_workspace
    out = _sweep(ws)
    infer = {k: p for k, p in out.points.items() if p["kind"] == "infer"}
    assert sorted(infer) == sorted(f"infer/{unit}/t{t}/b{b}" for unit in ("pc/torch/torch", "host/onnxruntime/torch-onnx")
                                   for t in (1, 2) for b in (1, 8))
    for key, p in infer.items():
        assert p["status"] == "measured", (key, p.get("reason"))
        assert 0 < p["p50_ms_per_sample"] <= p["p90_ms_per_sample"], key
        assert p["throughput_sps"] > 0 and p["cpu_percent"] > 0
        assert p["batches"] >= 3  # enough batches and samples, or a slow point stopped at its floor of 3
        assert p["memory_bytes"]["process_peak_rss_bytes"] > 20 * 2**20
    # each runtime really ran at the thread count of its point
    env = {(p["runtime"], p["threads"], p["environment"].get("intra_op_threads", p["environment"].get(
        "intra_op_num_threads"))) for p in infer.values()}
    assert env == {(rt, t, t) for rt in ("torch", "onnxruntime") for t in (1, 2)}
    assert out.measured == 8 and out.failed == 0

    doc = json.loads(out.report_html.with_name("report.json").read_text())
    assert [s["id"] for s in doc["sections"]] == ["inference", "threads"]
    html = out.report_html.read_text()
    assert html.count("<polyline") == 8  # 2 runtimes x 2 thread counts, in two charts

    again = _sweep(ws)
    assert (again.run_id, again.measured, again.reused) == (out.run_id, 0, 8)
    assert again.points == out.points


def test_a_training_point_measures_time_accuracy_and_epochs_to_target(lenet5_workspace):
    ws, _, _, _ = lenet5_workspace
    out = _sweep(ws, "train")
    (p,) = out.points.values()
    assert p["status"] == "measured", p.get("reason")
    assert (p["framework"], p["batch_size"], p["threads"], p["train_samples"]) == ("torch", 64, 1, 256)
    assert len(p["seconds_per_epoch"]) == len(p["accuracy_per_epoch"]) == 2 and p["final_accuracy"] > 0.2
    assert p["epochs_to_target"] == next((i + 1 for i, a in enumerate(p["accuracy_per_epoch"]) if a >= 0.5), None)
    assert 0 < p["cpu_percent"] < 250 and p["memory_bytes"]["process_peak_rss_bytes"] > 50 * 2**20
    html = out.report_html.read_text()
    assert "Test accuracy against training time" in html and html.count("<polyline") == 1
