"""The bug bundle on its own: what goes in for a measured failure and for a
conversion failure, and that reproduce.py judges with the runtime alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deploytool.data.feed import Feed
from deploytool.artifact import Artifact
from deploytool.bugs.bundle import write_bundle
from deploytool.result import Combo, Result, Status
from tests import results as factory
from tests.integration.test_usermodel import onnx_model

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files


def _result(status: str, artifact: dict | None, outputs_path: str = "", flipped=()) -> Result:
    measured = status == "measured"
    return Result(run_id="r", combo_key="k", model="m", dataset="d", combo=Combo("keras", "onnx", "int8", "host"),
                  status=Status(status), reason="" if measured else "tf2onnx 1.17.0: KeyError: 'x'",
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
    bundle = write_bundle(res, tmp_path / "bugs", x_test=Feed.one("input", x), baseline_outputs=truth, source=art,
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


def test_conversion_failure_bundle_carries_the_source_and_a_converter_call_that_fails_the_same_way(tmp_path):
    from deploytool.bugs.bundle import StepInput
    from deploytool.convert.registry import STEPS

    src_file = tmp_path / "model.keras"
    src_file.write_bytes(b"zip")
    src = Artifact(path=src_file, format="keras", framework="keras", layout="NHWC", input_shape=(8, 8, 1),
                   num_outputs=10)
    res = _result("conversion_failed", None)
    x = np.zeros((5, 8, 8, 1), np.float32)
    bundle = write_bundle(res, tmp_path / "bugs", x_test=Feed.one("input", x), baseline_outputs=np.zeros((5, 10), np.float32),
                          source=src, versions={"tf2onnx": "1.17.0"}, command="deploytool migrate --fresh",
                          step_input=StepInput(STEPS["onnx_tf"], src))
    assert (bundle / "model" / "model.keras").read_bytes() == b"zip" and not (bundle / "observed.npy").exists()
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["title"] == "tf2onnx 1.17.0 cannot convert m (keras) to onnx/int8: KeyError: 'x'"
    assert meta["convert"]["packages"]["tf2onnx"] and not (bundle / "reproduce.py").exists()
    readme = (bundle / "README.md").read_text()
    assert "python reproduce_convert.py" in readme and "tf2onnx==" in readme and res.reason in readme
    r = subprocess.run([sys.executable, str(bundle / "reproduce_convert.py")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and "REPRODUCED" in r.stdout, r.stdout + r.stderr  # a file Keras cannot read


def _imports(path) -> tuple[set[str], set[str]]:
    """Top-level packages a script imports: (at module level, inside functions)."""
    import ast

    top: set[str] = set()
    lazy: set[str] = set()
    tree = ast.parse(path.read_text())
    in_functions = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for n in ast.walk(f)}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        (lazy if id(node) in in_functions else top).update(n.split(".")[0] for n in names)
    return top, lazy


def _modules_of(dists: set[str]) -> set[str]:
    """The import names that `pip install <dists>` brings: the distributions and their dependencies."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo = set(), list(dists)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return {m for m, ds in metadata.packages_distributions().items() if any(canonicalize_name(d) in seen for d in ds)}


GUARD = """import runpy, sys
allowed = set(sys.argv[2].split(","))
class OnlyNamed:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in allowed and top not in sys.stdlib_module_names and not top.startswith("_"):
            raise ImportError(f"{top} is not among the packages the bundle names")
sys.meta_path.insert(0, OnlyNamed())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_an_onnx_bundle_and_its_backend_test_folder_replay_with_only_the_packages_it_names(tmp_path):
    """reproduce.py imports (read from its source) are the standard library and what bundle.json names; run in a
    Python that can import nothing else (the named packages and their own dependencies), it replays the model and
    backend_test/ — ONNX's layout, with only the samples whose prediction changed."""
    model = onnx_model(tmp_path / "m.onnx", [None, 8, 8, 1], external=True)
    x = np.random.default_rng(0).random((40, 8, 8, 1), dtype=np.float32)
    import onnxruntime as ort

    truth = ort.InferenceSession(str(model)).run(None, {"x": x})[0]
    wrong = truth.copy()
    wrong[[5, 9, 30], 0] += 1e4  # the target changed three predictions
    np.save(tmp_path / "outputs.npy", wrong)
    art = Artifact(path=model, format="onnx", framework="onnx", layout="NHWC", input_shape=(8, 8, 1),
                   num_outputs=10, converter="onnxruntime.quantization", converter_version="1.23.0", sha256="abc",
                   size_bytes=1)
    res = _result("measured", art.to_json(), str(tmp_path / "outputs.npy"), flipped=(30, 9, 5))
    versions = {"numpy": np.__version__, "onnxruntime": ort.__version__, "onnx": "1.19.1", "tensorflow": "2.x"}
    bundle = write_bundle(res, tmp_path / "bugs", x_test=Feed.one("input", x), baseline_outputs=truth, source=art, versions=versions,
                          command="deploytool migrate ...")
    meta = json.loads((bundle / "bundle.json").read_text())
    assert set(meta["packages"]) == {"numpy", "onnxruntime", "onnx"}
    assert "pip install numpy==" in (bundle / "README.md").read_text()

    from onnx import numpy_helper

    case = bundle / "backend_test"
    assert sorted(str(p.relative_to(case)) for p in case.rglob("*") if p.is_file()) == [
        "model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"]
    inputs = numpy_helper.to_array(onnx_tensor(case / "test_data_set_0" / "input_0.pb"))
    outputs = numpy_helper.to_array(onnx_tensor(case / "test_data_set_0" / "output_0.pb"))
    where = [int(np.flatnonzero((x == sample).all(axis=(1, 2, 3)))[0]) for sample in inputs]
    assert sorted(where) == [5, 9, 30]  # the three samples whose prediction changed, no more
    np.testing.assert_allclose(outputs, truth[where], rtol=1e-6)
    assert sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) < 10 * 2**20

    named = {m for m in _modules_of(set(meta["packages"]))}
    top, lazy = _imports(bundle / "reproduce.py")
    assert top - set(sys.stdlib_module_names) <= {"numpy"} <= named, top
    assert (lazy - set(sys.stdlib_module_names)) - named == {"ai_edge_litert", "tensorflow"}, lazy  # the TFLite runners
    (tmp_path / "guard.py").write_text(GUARD)
    r = subprocess.run([sys.executable, str(tmp_path / "guard.py"), str(bundle / "reproduce.py"), ",".join(named)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backend_test/ (3 samples): top-1 agreement with output_0.pb 100.00%" in r.stdout, r.stdout
    blocked = subprocess.run([sys.executable, str(tmp_path / "guard.py"), str(bundle / "reproduce.py"), "numpy"],
                             capture_output=True, text=True, timeout=120)
    assert blocked.returncode != 0 and "not among the packages the bundle names" in blocked.stderr  # the guard bites


def onnx_tensor(path):
    from onnx import TensorProto

    t = TensorProto()
    t.ParseFromString(path.read_bytes())
    return t


def test_a_conversion_bundle_reproduces_deploytools_own_call_byte_for_byte(tmp_path):
    """reproduce_convert.py's convert() is the call deploytool makes: run without deploytool (an import of it
    raises there) on the bundle's own files, onnxruntime's dynamic quantization and TFLite's converter write the
    very bytes deploytool's conversion wrote."""
    import shutil

    from deploytool.bugs.bundle import StepInput
    from deploytool.bugs.confirm import _BLOCK
    from deploytool.convert import convert
    from deploytool.convert.registry import STEPS
    from tests.integration.tiny_models import build_keras

    onnx_src = Artifact(path=onnx_model(tmp_path / "m.onnx", [None, 8, 8, 1]), format="onnx", framework="onnx",
                        layout="NHWC", input_shape=(8, 8, 1), num_outputs=10)
    (tmp_path / "keras").mkdir()
    keras_src = build_keras(tmp_path / "keras", epochs=1).artifact
    x = np.zeros((4, 8, 8, 1), np.float32)
    for src, fmt, quantize, step, name in ((onnx_src, "onnx", "dynamic", "onnx_quant", "model.onnx"),
                                            (keras_src, "tflite", "none", "tflite_tf", "model.tflite")):
        made = convert(src, fmt, quantize, tmp_path / f"made-{step}")
        res = Result(run_id="r", combo_key=f"k-{step}", model="m", dataset="d",
                     combo=Combo(src.format, fmt, quantize, "host"), status=Status.CONVERSION_FAILED,
                     reason=f"{STEPS[step].converter} x: ValueError: planted")
        bundle = write_bundle(res, tmp_path / "bugs", x_test=Feed.one("input", x),
                              baseline_outputs=np.zeros((4, 10), np.float32), source=src, versions={},
                              command="deploytool migrate ...", step_input=StepInput(STEPS[step], src))
        run = tmp_path / f"run-{step}"
        shutil.copytree(bundle, run)
        r = subprocess.run([sys.executable, "-I", "-c", _BLOCK, "reproduce_convert.py"], cwd=run, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and "not reproduced: the conversion succeeded here" in r.stdout, r.stdout + r.stderr
        assert (run / "converted" / name).read_bytes() == Path(made.path).read_bytes(), step
