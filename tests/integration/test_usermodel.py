"""A user's own model file: what is read from the model (input shape, layout,
outputs), what must be asked for, and that the file is copied whole (ONNX
external weights included) into the workspace."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.errors import BadModelFile, DataError, ShapeError
from deploytool.run.usermodel import UserModelOptions, resolve
from deploytool.workspace import Workspace

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files


def onnx_model(path, input_dims, external: bool = False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    flat = int(np.prod(input_dims[1:]))
    w = numpy_helper.from_array(np.random.default_rng(0).random((flat, 10)).astype(np.float32), "W")
    shape = numpy_helper.from_array(np.array([-1, flat], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["f"]), helper.make_node("MatMul", ["f", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], [w, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=1024)
    else:
        onnx.save(model, str(path))
    return path


def test_shape_layout_and_external_weights_are_read_from_the_model(tmp_path):
    ws = Workspace.open(tmp_path / "ws")
    spec, art = resolve(onnx_model(tmp_path / "m.onnx", [None, 28, 28, 1], external=True), UserModelOptions(), ws)
    assert spec.input_shape == (28, 28, 1) and art.layout == "NHWC" and spec.num_classes == 10
    assert sorted(p.name for p in art.path.parent.iterdir()) == ["artifact.json", "m.onnx", "m.onnx.data"]
    spec, art = resolve(onnx_model(tmp_path / "n.onnx", [None, 3, 32, 32]), UserModelOptions(), ws)
    assert spec.input_shape == (32, 32, 3) and art.layout == "NCHW"


def test_what_cannot_be_inferred_is_asked_for(tmp_path):
    ws = Workspace.open(tmp_path / "ws")
    ambiguous = onnx_model(tmp_path / "a.onnx", [None, 3, 8, 3])
    with pytest.raises(ShapeError, match="--layout"):
        resolve(ambiguous, UserModelOptions(), ws)
    spec, image = resolve(ambiguous, UserModelOptions(layout="NCHW"), ws)
    assert spec.input_shape == (8, 3, 3)
    # an image classifier keeps the signature read where it entered: its runtimes bind the file's own names
    assert image.signature.input_names == ("x",) and image.signature.output_names == ("y",)
    assert image.signature.inputs[0].shape == (None, 3, 8, 3) and image.input_shape == (3, 8, 3)
    with pytest.raises(DataError, match="--labels names 2 classes"):
        resolve(onnx_model(tmp_path / "b.onnx", [None, 8, 8, 1]), UserModelOptions(labels=("a", "b")), ws)
    # a model that is not one image in and class scores out is read by its signature (issue 24), not refused
    spec, art = resolve(onnx_model(tmp_path / "c.onnx", [None, 64]), UserModelOptions(), ws)
    assert spec.signature is not None and spec.signature.inputs[0].kind == "features"
    assert art.signature == spec.signature and spec.labels == tuple(str(i) for i in range(10))


def test_unsafe_and_unknown_files_are_refused(tmp_path):
    ws = Workspace.open(tmp_path / "ws")
    pickled = tmp_path / "model.pt"
    pickled.write_bytes(b"\x80\x04anything")
    with pytest.raises(BadModelFile, match="never loaded"):
        resolve(pickled, UserModelOptions(), ws)
    with pytest.raises(BadModelFile, match="no such model file"):
        resolve(tmp_path / "missing.onnx", UserModelOptions(), ws)
    (tmp_path / "dir").mkdir()
    with pytest.raises(BadModelFile, match="not a SavedModel"):
        resolve(tmp_path / "dir", UserModelOptions(), ws)
    broken = onnx_model(tmp_path / "e.onnx", [None, 8, 8, 1], external=True)
    (tmp_path / "e.onnx.data").unlink()
    with pytest.raises(BadModelFile):
        resolve(broken, UserModelOptions(), ws)


@pytest.mark.parametrize("target", ["host", pytest.param("web", marks=pytest.mark.browser)])
def test_user_onnx_with_external_weights_runs_unchanged(tmp_path, target):
    """`--format onnx --quantize none` copies the user's .onnx as it is: its external weights go with it,
    so the artifact loads and agrees on every sample."""
    import json

    from deploytool.artifact import Artifact
    from tests.conftest import run_cli

    (tmp_path / "user").mkdir()
    model = onnx_model(tmp_path / "user" / "x.onnx", [None, 8, 8, 1], external=True)
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "test.npz", x=rng.random((64, 8, 8, 1), dtype=np.float32), y=rng.integers(0, 10, 64))
    ws = tmp_path / "ws"
    r = run_cli("migrate", "--model", str(model), "--data", str(tmp_path / "test.npz"), "--format", "onnx",
                "--quantize", "none", "--target", target, "--workspace", str(ws), "--quiet", "--latency-samples", "5",
                timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.strip().splitlines()[-1].split()[1].rstrip(":")
    assert run_id.startswith("x-"), run_id  # named after the model, not after its weights file
    (row,) = json.loads((ws / "reports" / run_id / "report.json").read_text())["results"]
    assert row["status"] == "measured" and row["metrics"]["agreement"] == 1.0, row
    arts = [Artifact.load(p) for p in ws.glob("artifacts/*/artifact.json")]
    (art,) = [a for a in arts if a.sha256 == row["artifact"]["sha256"]]
    assert sorted(p.name for p in art.path.parent.iterdir()) == ["artifact.json", "model.onnx", "x.onnx.data"]
    assert art.size_bytes == model.stat().st_size + (model.parent / "x.onnx.data").stat().st_size


@pytest.mark.browser
def test_user_onnx_migrates_to_tflite_and_tfjs_through_onnx2tf(tmp_path):
    """`--model my.onnx --format tflite,tfjs` converts with onnx2tf (external weights read in place), once for the
    host and the browser, and the rows compare as for any other artifact: at --quantize none every sample agrees.
    TF.js runs in the browser only: its host rows say so."""
    import json

    from tests.conftest import run_cli
    from tests.kept import conversions_kept

    (tmp_path / "user").mkdir()
    model = onnx_model(tmp_path / "user" / "my.onnx", [None, 8, 8, 1], external=True)
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "test.npz", x=rng.random((64, 8, 8, 1), dtype=np.float32), y=rng.integers(0, 10, 64))
    ws = tmp_path / "ws"
    with conversions_kept(ws, "user-onnx2tf"):  # onnx2tf's four files, kept between sessions (tests/kept.py)
        r = run_cli("migrate", "--model", str(model), "--data", str(tmp_path / "test.npz"), "--format", "tflite,tfjs",
                    "--quantize", "none,int8", "--target", "host,web", "--workspace", str(ws), "--quiet",
                    "--latency-samples", "5", timeout=900)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    run_id = r.stdout.strip().splitlines()[-1].split()[1].rstrip(":")
    rows = json.loads((ws / "reports" / run_id / "report.json").read_text())["results"]
    ran = [row for row in rows if row["status"] != "not_applicable"]
    assert {(row["target"], row["format"], row["quantize"]) for row in ran} == {
        (t, f, q) for t, f in (("host", "tflite"), ("web", "tflite"), ("web", "tfjs")) for q in ("none", "int8")}, rows
    for row in ran:
        assert row["artifact"]["converter"].split(" + ")[0] == "onnx2tf", row
        assert row["status"] == "measured", row
        assert row["metrics"]["agreement"] >= (1.0 if row["quantize"] == "none" else 0.8), row


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd"])
def test_weights_named_outside_the_models_folder_are_one_line_and_nothing_is_copied(tmp_path, location):
    import onnx

    from tests.conftest import run_cli

    model = onnx_model(tmp_path / "x.onnx", [None, 8, 8, 1], external=True)
    proto = onnx.load(str(model), load_external_data=False)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = location
    model.write_bytes(proto.SerializeToString())
    np.savez(tmp_path / "test.npz", x=np.zeros((4, 8, 8, 1), np.float32), y=np.arange(4))
    r = run_cli("migrate", "--model", str(model), "--data", str(tmp_path / "test.npz"), "--format", "onnx",
                "--quantize", "none", "--target", "host", "--workspace", str(tmp_path / "ws"), "--quiet")
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "outside the model's folder" in lines[0], r.stderr
    assert not list((tmp_path / "ws").glob("models/*"))


def test_an_nchw_onnx_with_nchw_data_runs_and_ambiguous_data_is_one_line(tmp_path):
    """Data stored in the model's NCHW layout is taken when only that reading fits; when it reads both
    ways, the user says which with --data-layout."""
    import json

    import onnxruntime as ort

    from tests.conftest import run_cli

    model = onnx_model(tmp_path / "n.onnx", [None, 3, 8, 8])
    rng = np.random.default_rng(2)
    x = rng.integers(0, 255, (64, 3, 8, 8)).astype(np.uint8)
    y = rng.integers(0, 10, 64)
    np.savez(tmp_path / "nchw.npz", x=x, y=y)
    ws = tmp_path / "ws"
    r = run_cli("migrate", "--model", str(model), "--data", str(tmp_path / "nchw.npz"), "--scale", str(1 / 255),
                "--format", "onnx", "--quantize", "none", "--workspace", str(ws), "--quiet", "--latency-samples", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.strip().splitlines()[-1].split()[1].rstrip(":")
    (row,) = json.loads((ws / "reports" / run_id / "report.json").read_text())["results"]
    direct = ort.InferenceSession(str(model)).run(None, {"x": x.astype(np.float32) * np.float32(1 / 255)})[0]
    assert row["status"] == "measured" and row["metrics"]["accuracy"] == float(np.mean(direct.argmax(1) == y))

    cube = onnx_model(tmp_path / "c.onnx", [None, 3, 3, 3])
    np.savez(tmp_path / "cube.npz", x=rng.integers(0, 255, (8, 3, 3, 3)).astype(np.uint8), y=np.arange(8))
    args = ["migrate", "--model", str(cube), "--layout", "NCHW", "--data", str(tmp_path / "cube.npz"),
            "--format", "onnx", "--quantize", "none", "--workspace", str(ws), "--quiet"]
    r = run_cli(*args)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--data-layout" in lines[0], r.stderr
    r = run_cli(*args, "--data-layout", "NCHW")
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_run_whose_outputs_cannot_fit_on_the_disk_is_refused_before_anything_is_measured(tmp_path):
    """A model that declares 4 TiB of output a sample (its output an Expand to 2^20 x 2^20 floats): the run would
    store more than this disk holds, so migrate refuses it in one line with the numbers and the fixes, exit 2,
    before the model runs anywhere (no run stored, no baseline measured)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from tests.conftest import run_cli

    side = 1 << 20
    shape = numpy_helper.from_array(np.array([1, side, side], np.int64), "shape")
    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, side, side])], [shape])
    model = tmp_path / "huge.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    data = tmp_path / "x.npz"
    np.savez(data, x=np.zeros((8, 1, 1), np.float32))
    ws = tmp_path / "ws"
    r = run_cli("migrate", "--model", str(model), "--data", str(data), "--target", "host", "--format", "onnx",
                "--quantize", "none", "--workspace", str(ws), "--quiet")
    line = r.stderr.strip()
    assert r.returncode == 2 and "\n" not in line and "Traceback" not in line, r.stderr
    assert "would store about" in line and "1 row(s) and 1 baseline(s) x 8 samples" in line, line
    assert f"{side * side:,} float32 values a sample" in line, line
    assert "GiB free" in line and "--test-samples" in line, line
    from deploytool.store import SqlAlchemyStore

    assert SqlAlchemyStore(Workspace.open(ws).default_db_url).list_runs() == []
    assert not list((ws / "models").rglob("baseline.json"))
