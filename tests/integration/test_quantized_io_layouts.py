"""Quantized I/O files and converter layouts through the real CLI on every runtime that runs them: LiteRT and
TensorFlow's interpreter on the host, tfjs-tflite and TF.js in headless Chromium, and the simulated phone (the
ADB simulator and benchmark_model double: TEST DOUBLES, no phone exists here; the double runs LiteRT's built-in
kernels). Two migrate runs over tiny models from tests/shapes.py:

- a fully int8 .tflite (int8 input and output, quantized elsewhere) fed float digits in 0..1;
- a PyTorch 1-D conv exported at batch 1 (NCW input [1, 1, 800], per-step output [N, 4, 198]) through onnx2tf,
  float and int8-io;

An NCHW per-pixel ONNX model made channels-last by onnx2tf is compared channels-first on the host and in the
browser by tests/integration/test_findings_triage.py ("channels"); the per-step run here takes that rule to the
phone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests import shapes
from tests.conftest import run_cli
from tests.kept import conversions_kept, kept_build
from tests.integration.test_android import BENCHMARK_MODEL_DOUBLE, adb_server, phone  # noqa: F401  (fixtures)

# android: the phone tests share the one adb server, so the whole file joins their xdist group (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.android]

RESTORED = "come channels-last from the converter; laid out channels-first"


def _build(d: Path) -> None:
    shapes.int8_tflite(d / "int8.tflite")
    shapes.keras_digits_cnn(d / "digits.keras")
    x, y = shapes.digits_images(200, seed=5)
    np.savez(d / "digits.npz", x=x, y=y)
    shapes.torch_audio_frames_pt2(d / "frames1.pt2", dynamic_batch=False)
    np.savez(d / "audio.npz", audio=shapes.audio_data())


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """The models and test sets, built once and kept between sessions (tests/kept.py), copied here."""
    d = tmp_path_factory.mktemp("qio")
    shutil.copytree(kept_build("qio-shapes", _build, Path(shapes.__file__)), d, dirs_exist_ok=True)
    return d


def _migrate(ws: Path, model: Path, data: Path, *args: str, run_id: str) -> tuple[dict, list[dict]]:
    """A migrate run through the CLI; the conversions that succeed are kept for the next session (keyed by the
    model's bytes and the converters' code: tests/kept.py)."""
    with conversions_kept(ws, "qio"):
        r = run_cli("migrate", "--model", str(model), "--data", str(data), "--target", "host,web,android",
                    "--benchmark-model", str(BENCHMARK_MODEL_DOUBLE), "--latency-samples", "5", "--warmup", "1",
                    "--workspace", str(ws), "--quiet", "--run-id", run_id, *args, timeout=1200)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    report = json.loads((ws / "reports" / run_id / "report.json").read_text())
    return report, [row for row in report["results"] if row["status"] != "not_applicable"]


def _file(ws: Path, row: dict) -> Path:
    """The converted model file a row ran (found beside its artifact.json, as the pipeline finds it: a conversion
    kept from an earlier session names the folder it was made in)."""
    from deploytool.artifact import Artifact

    for meta in (ws / "artifacts").glob("*/artifact.json"):
        art = Artifact.load(meta)
        if art.sha256 == row["artifact"]["sha256"]:
            return art.path
    raise AssertionError(f"no artifact for {row['label']}")


def _tflite_shapes(path: Path) -> tuple[list[list[int]], list[list[int]]]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    return ([d["shape_signature"].tolist() for d in it.get_input_details()],
            [d["shape_signature"].tolist() for d in it.get_output_details()])


@pytest.fixture(scope="module")
def int8_run(models, tmp_path_factory, phone):  # noqa: F811
    ws = tmp_path_factory.mktemp("ws-int8")
    return _migrate(ws, models / "int8.tflite", models / "digits.npz", "--runtime", "all", run_id="int8")


def test_a_fully_int8_file_takes_float_data_and_scores_as_the_float_model_on_every_runtime(models, int8_run):
    report, rows = int8_run
    assert sorted(r["label"].split(" on ")[1].split("@")[0] for r in rows) == \
        ["android:cpu", "host", "host[tensorflow-lite]", "web:wasm"]
    import keras

    model = keras.saving.load_model(models / "digits.keras")  # the float model the file was quantized from
    z = np.load(models / "digits.npz")
    float_accuracy = float(np.mean(model.predict(z["x"], verbose=0).argmax(1) == z["y"]))
    baseline = report["baselines"]["tflite"]["accuracy"]
    assert abs(baseline - float_accuracy) <= 0.03 and baseline > 0.8, (baseline, float_accuracy)
    for row in rows:
        assert row["status"] == "measured" and row["verdict"] == "pass", (row["label"], row["reason"], row["checks"])
        assert abs(row["metrics"]["accuracy"] - float_accuracy) <= 0.03
        notes = " | ".join(row["notes"])
        assert "int8 model input image: float data quantized with the tensor's scale 0.00392157" in notes, notes
        assert "int8 model output" in notes and "dequantized with its scale" in notes, notes
        assert "judged by the quantized tolerances" in notes, notes
        assert "max_abs_error" not in {c["metric"] for c in row["checks"]}


def test_the_phone_s_built_in_kernels_stay_within_one_output_step_of_litert(int8_run):
    report, rows = int8_run
    (on_phone,) = [r for r in rows if r["target"] == "android"]
    step = 0.13  # the file's output scale (0.12997...): its kernels round apart by whole steps, if at all
    assert on_phone["metrics"]["max_abs_error"] <= step and on_phone["metrics"]["agreement"] >= 0.98


@pytest.fixture(scope="module")
def frames_run(models, tmp_path_factory, phone):  # noqa: F811
    ws = tmp_path_factory.mktemp("ws-frames")
    return ws, *_migrate(ws, models / "frames1.pt2", models / "audio.npz", "--format", "tflite-onnx2tf",
                         "--quantize", "none,int8-io", run_id="frames")


def test_an_ncw_program_at_batch_1_through_onnx2tf_is_compared_per_step_in_its_own_layout(frames_run):
    ws, _, rows = frames_run
    assert len(rows) == 6  # none and int8-io, each on host, web and the phone
    (baseline,) = (json.loads(p.read_text()) for p in (ws / "models").glob("*/baselines/*/baseline.json"))
    assert any("exported at a fixed batch of 1" in n for n in baseline["provenance"]["notes"])  # PyTorch at its batch
    for row in rows:
        assert row["status"] == "measured" and row["verdict"] == "pass", (row["label"], row["reason"], row["checks"])
        (out,) = row["outputs"]
        assert out["name"] == "tanh" and out["shape"] == [4, 198]  # the source's (channels, steps)
        assert any(RESTORED in n for n in row["notes"]), row["notes"]
        limit = 1e-5 if row["quantize"] == "none" else 0.05  # int8-io: a step of its int8 output, 1/128
        assert out["max_abs_error"] < limit and out["cosine_min"] > 0.999, (row["label"], out)
    ins, outs = _tflite_shapes(_file(ws, rows[0]))
    assert ins == [[1, 1, 800]] and outs == [[1, 198, 4]]  # input kept NCW, output made channels-last in the file


def test_the_quantized_per_step_rows_quantize_their_ncw_input_and_dequantize_their_output(frames_run):
    _, _, rows = frames_run
    for row in (r for r in rows if r["quantize"] == "int8-io"):
        notes = " | ".join(row["notes"])
        assert "int8 model input audio: float data quantized" in notes and "before comparison" in notes, notes
