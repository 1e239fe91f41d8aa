"""Models that are not single-input image classifiers, through the real CLI, on the host runtimes, in headless
Chromium and on the simulated phone (the ADB simulator and benchmark_model double: TEST DOUBLES, no phone
exists here): a sequence model (a Keras LSTM), a text classifier with token ids and a mask (an ONNX with two
int64 inputs), and a model with two outputs (one comparison each); the tabular regressor (float labels:
MAE/RMSE) is in test_findings_triage.py's shared run. Tiny models from tests/anymodels.py; each case is one migrate run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests import anymodels
from tests.conftest import run_cli
from tests.kept import conversions_kept, kept_build
from tests.integration.test_android import BENCHMARK_MODEL_DOUBLE, adb_server, phone  # noqa: F401  (fixtures)

# android: the phone tests share the one adb server, so the whole file joins their xdist group (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.android]


def _migrate(tmp: Path, model: Path, data: Path, *args: str, run_id: str) -> list[dict]:
    with conversions_kept(tmp / "ws", "any"):  # of the kept models' bytes (tests/kept.py)
        r = run_cli("migrate", "--model", str(model), "--data", str(data), "--latency-samples", "5", "--warmup", "1",
                    "--workspace", str(tmp / "ws"), "--quiet", "--run-id", run_id, *args, cwd=tmp, timeout=1200)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stdout + r.stderr
    return json.loads((tmp / "ws" / "reports" / run_id / "report.json").read_text())["results"]


def _rows(rows: list[dict], **where: str) -> list[dict]:
    return [r for r in rows if all(r[k] == v for k, v in where.items())]


def _build(d: Path) -> None:
    anymodels.onnx_text_classifier(d / "text.onnx")
    anymodels.text_data(d / "text.npz")
    anymodels.keras_lstm(d / "seq.keras")
    anymodels.sequence_data(d / "seq.npz")
    anymodels.keras_two_outputs(d / "two.keras")
    np.savez(d / "two.npz", features=np.random.default_rng(3).normal(size=(40, 16)).astype(np.float32))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """The models and test sets, built once and kept between sessions (tests/kept.py), copied here."""
    d = tmp_path_factory.mktemp("any")
    shutil.copytree(kept_build("any-models", _build, Path(anymodels.__file__)), d, dirs_exist_ok=True)
    return d


def test_a_text_classifier_with_ids_and_a_mask_on_the_host_in_the_browser_and_on_the_phone(models, tmp_path, phone):  # noqa: F811
    rows = _migrate(tmp_path, models / "text.onnx", models / "text.npz", "--target", "host,web,android", "--format",
                    "onnx,tflite", "--quantize", "none", "--benchmark-model", str(BENCHMARK_MODEL_DOUBLE),
                    run_id="text")
    host = _rows(rows, target="host", format="onnx")[0]
    assert host["status"] == "measured" and host["metrics"]["agreement"] == 1.0  # its own file, its own runtime
    web = _rows(rows, target="web", format="onnx")[0]  # onnxruntime-web, int64 inputs as BigInt64Array
    assert web["status"] == "measured" and web["metrics"]["agreement"] == 1.0, web["reason"]
    assert web["metrics"]["max_abs_error"] < 1e-4
    lite = _rows(rows, target="host", format="tflite")[0]  # onnx2tf takes both inputs
    assert lite["status"] == "measured" and lite["metrics"]["agreement"] == 1.0, lite["reason"]
    (on_phone,) = _rows(rows, target="android", format="tflite")  # benchmark_model: one value file per input, comma lists
    assert on_phone["status"] == "measured" and on_phone["metrics"]["agreement"] == 1.0, on_phone["reason"]


def test_a_sequence_model_on_the_host_and_the_simulated_phone(models, tmp_path, phone):  # noqa: F811
    rows = _migrate(tmp_path, models / "seq.keras", models / "seq.npz", "--target", "host,android", "--format",
                    "tflite", "--quantize", "none", "--benchmark-model", str(BENCHMARK_MODEL_DOUBLE),
                    run_id="seq")
    for target in ("host", "android"):
        none = _rows(rows, target=target, quantize="none")[0]
        assert none["status"] == "measured", (target, none["reason"])
        assert none["metrics"]["agreement"] == 1.0 and none["metrics"]["max_abs_error"] < 1e-4
    assert any("unrolled" in n for r in rows for n in r["notes"])  # Keras's LSTM loop, converted unrolled


def test_two_outputs_get_one_comparison_each(models, tmp_path):
    rows = _migrate(tmp_path, models / "two.keras", models / "two.npz", "--target", "host,web", "--format",
                    "tflite,onnx,tfjs", "--quantize", "none", run_id="two")
    ran = [r for r in rows if r["status"] != "not_applicable"]  # TF.js runs in the browser only
    assert len(ran) == 5 and all(r["status"] == "measured" for r in ran), \
        [(r["target"], r["format"], r["reason"][:90]) for r in rows]
    report = json.loads((tmp_path / "ws" / "reports" / "two" / "report.json").read_text())
    stored = report["results"][0]
    assert [o["name"] for o in stored["outputs"]] == ["scores", "value"]
    assert all(o["cosine_min"] > 0.9999 for r in report["results"] for o in r["outputs"])
    assert all(len(r["outputs"]) == 2 for r in report["results"] if r["status"] == "measured")


def test_a_failing_text_row_bundles_every_input_and_its_reproducer_runs_them(models, tmp_path):
    import subprocess
    import sys

    from onnx import TensorProto

    rows = _migrate(tmp_path, models / "text.onnx", models / "text.npz", "--target", "host", "--format", "onnx",
                    "--quantize", "dynamic", "--tolerance", "max_abs_error=0,0", run_id="text-fail")
    (row,) = rows
    assert row["failing"] and row["bundle"], row
    bundle = tmp_path / "ws" / "reports" / "text-fail" / row["bundle"]
    with np.load(bundle / "inputs.npz") as z:
        assert sorted(z.files) == ["attention_mask", "input_ids"] and z["input_ids"].dtype == np.int64
    data = bundle / "backend_test" / "test_data_set_0"
    names = set()
    for pb in sorted(data.glob("input_*.pb")):
        t = TensorProto()
        t.ParseFromString(pb.read_bytes())
        names.add(t.name)
        assert t.data_type == TensorProto.INT64
    assert names == {"input_ids", "attention_mask"} and (data / "output_0.pb").is_file()
    r = subprocess.run([sys.executable, "reproduce.py"], cwd=bundle, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "REPRODUCED" in r.stdout, r.stdout + r.stderr  # max |error| > 0 on the host
    assert "backend_test/" in r.stdout
