"""A task is one module: tests/segmentation_task.py (per-pixel classification, registered when imported) runs
through migrate's CLI on a channels-last ONNX segmenter built here, is judged by its own metrics and tolerances,
and shows its own columns in the terminal, summary.md, report.json and the HTML report, without any file of
deploytool knowing it exists."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, run_cli

NAME = "segmentation"  # tests/segmentation_task.py registers it in the CLI's processes (not in this one)

pytestmark = pytest.mark.slow

CLASSES, SIZE, N = 3, 16, 24


def _segmenter(path: Path) -> None:
    """`image` [N, 3, 16, 16] -> `mask` [N, 16, 16, 3]: a 3x3 convolution to class scores, then channels last."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, (CLASSES, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["image", "w"], ["scores"], pads=[1, 1, 1, 1]),
         helper.make_node("Transpose", ["scores"], ["mask"], perm=[0, 2, 3, 1])],
        "segmenter", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["N", SIZE, SIZE, CLASSES])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def _labels(model: Path, x: np.ndarray) -> np.ndarray:
    """The model's own classes per pixel with a tenth of the pixels set at random: an mIoU below 1 to drop from."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    pred = sess.run(None, {"image": x})[0].argmax(-1)
    rng = np.random.default_rng(1)
    noise = rng.random(pred.shape) < 0.1
    return np.where(noise, rng.integers(0, CLASSES, pred.shape), pred).astype(np.int64)


def test_a_task_registered_by_one_module_flows_through_migrate_and_the_report(tmp_path):
    model = tmp_path / "seg.onnx"
    _segmenter(model)
    x = np.random.default_rng(2).uniform(0, 1, (N, 3, SIZE, SIZE)).astype(np.float32)
    y = _labels(model, x)
    np.savez(tmp_path / "seg.npz", image=x, y=y)
    env = {"DEPLOYTOOL_PLUGINS": "tests.segmentation_task",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}

    assert NAME in run_cli("migrate", "--help", env=env).stdout  # --task offers it
    r = run_cli("migrate", "--model", str(model), "--data", str(tmp_path / "seg.npz"), "--task", NAME,
                "--target", "host", "--format", "onnx", "--quantize", "none,dynamic", "--latency-samples", "5",
                "--warmup", "1", "--workspace", str(tmp_path / "ws"), "--run-id", "seg", env=env, cwd=tmp_path)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "px agree" in r.stdout and "mIoU" in r.stdout, r.stdout  # the terminal's table: the task's brief

    report = tmp_path / "ws" / "reports" / "seg"
    rows = {row["quantize"]: row for row in json.loads((report / "report.json").read_text())["results"]}
    assert set(rows) == {"none", "dynamic"}
    for row in rows.values():
        assert row["status"] == "measured" and row["task"] == NAME, row
        assert {c["metric"] for c in row["checks"]} >= {"pixel_agreement", "miou_drop_points"}, row["checks"]
    none = rows["none"]
    # the same file in the same runtime: every pixel agrees, and the labels' mIoU is the baseline's
    assert none["verdict"] == "pass" and none["metrics"]["pixel_agreement"] == 1.0, none
    assert none["metrics"]["miou_drop_points"] == 0.0 and 0.5 < none["metrics"]["miou"] < 1.0, none["metrics"]
    assert none["metrics"]["accuracy"] is None and none["flipped"] == []  # no classifier's numbers on it

    html = (report / "report.html").read_text()
    assert all(head in html for head in ("px agree", "mIoU", "ΔmIoU pts")), "the HTML table shows the task's columns"
    assert "per-pixel classes" in html  # the header's words for its test set
    summary = (report / "summary.md").read_text()
    assert "px agree" in summary and "mIoU" in summary, summary
