"""The bug bundle on its own: what goes in for a measured failure and for a
conversion failure, and that reproduce.py judges with the runtime alone."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from deploytool.artifact import Artifact
from deploytool.bugreport import write_bundle
from deploytool.result import Combo, Result
from tests import results as factory
from tests.integration.test_usermodel import onnx_model


def _result(status: str, artifact: dict | None, outputs_path: str = "", flipped=()) -> Result:
    measured = status == "measured"
    return Result(run_id="r", combo_key="k", model="m", dataset="d", combo=Combo("keras", "onnx", "int8", "host"),
                  status=status, reason="" if measured else "tf2onnx 1.17.0: KeyError: 'x'",
                  comparison=factory.comparison(accuracy=0.5, baseline_accuracy=0.9, agreement=0.5, max_abs_error=3.0,
                                                flipped=tuple(flipped), verdict="fail") if measured else None,
                  artifact=Artifact.from_json(artifact) if artifact else None,
                  tolerances={"agreement": (0.98, 0.95), "accuracy_drop_points": (1, 3)},
                  environment={"runtime": "onnxruntime", "version": "1.32.0", "facts": {"cores": 2}},
                  outputs_path=outputs_path)


def test_measured_failure_bundle_reproduces_with_onnxruntime(tmp_path):
    model = onnx_model(tmp_path / "m.onnx", [None, 8, 8, 1], external=True)
    rng = np.random.default_rng(0)
    x = rng.random((40, 8, 8, 1), dtype=np.float32)
    import onnxruntime as ort

    truth = ort.InferenceSession(str(model)).run(None, {"x": x})[0]
    wrong = truth.copy()
    wrong[:, 0] += 100.0  # the "target" said class 0 for everything
    np.save(tmp_path / "outputs.npy", wrong)
    art = Artifact(path=model, format="onnx", framework="keras", layout="NHWC", input_shape=(8, 8, 1),
                   num_outputs=10, converter="tf2onnx", converter_version="1.17.0", sha256="abc", size_bytes=1)
    res = _result("measured", art.to_json(), str(tmp_path / "outputs.npy"), flipped=(7, 3))
    # the expected outputs are the truth; the runtime here is right, so a host finding would NOT reproduce
    bundle = write_bundle(res, tmp_path / "bugs", x_test=x, baseline_outputs=truth, source=art,
                          versions={"onnxruntime": "1.32.0"}, command="deploytool migrate ...")
    assert sorted(p.name for p in (bundle / "model").iterdir()) == ["m.onnx", "m.onnx.data"]
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["sample_indices"][:2] == [7, 3] and len(meta["sample_indices"]) == 16
    assert np.array_equal(np.load(bundle / "inputs.npy"), x[meta["sample_indices"]])
    readme = (bundle / "README.md").read_text()
    assert "onnxruntime==1.32.0" in readme and "facts.cores: 2" in readme and "deploytool migrate ..." in readme
    r = subprocess.run([sys.executable, str(bundle / "reproduce.py")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "not reproduced here" in r.stdout and "agreement with the source model 100.00%" in r.stdout
    # against outputs that disagree with this runtime, it reproduces and exits 1
    np.save(bundle / "expected.npy", wrong[meta["sample_indices"]])
    r = subprocess.run([sys.executable, str(bundle / "reproduce.py")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "REPRODUCED" in r.stdout


def test_conversion_failure_bundle_carries_the_source_and_the_error(tmp_path):
    src_file = tmp_path / "model.keras"
    src_file.write_bytes(b"zip")
    src = Artifact(path=src_file, format="keras", framework="keras", layout="NHWC", input_shape=(8, 8, 1),
                   num_outputs=10)
    res = _result("conversion_failed", None)
    x = np.zeros((5, 8, 8, 1), np.float32)
    bundle = write_bundle(res, tmp_path / "bugs", x_test=x, baseline_outputs=np.zeros((5, 10), np.float32),
                          source=src, versions={"tf2onnx": "1.17.0"}, command="deploytool migrate --fresh")
    assert (bundle / "model" / "model.keras").read_bytes() == b"zip" and not (bundle / "observed.npy").exists()
    assert "cannot convert" in json.loads((bundle / "bundle.json").read_text())["title"]
    r = subprocess.run([sys.executable, str(bundle / "reproduce.py")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "KeyError: 'x'" in r.stdout
