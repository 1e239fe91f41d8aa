"""ONNX external data: which files a model names, copying them with it, the
hash and size that cover them, and locations that try to leave the model's
folder (refused before anything is read or written)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from deploytool import artifact

from deploytool.modelfiles import onnx_external
from deploytool.errors import BadModelFile, StageFailed


def tiny_onnx(path, *, location: str | None = "", constant: bool = False):
    """x (N,4,4,1) -> Flatten -> MatMul W (16,3) [-> Add a Constant]; saved with every tensor in one
    external file named `location` (default `<name>.data`), or inside the .onnx when location is None.
    (Flatten, not Reshape: onnxruntime cannot infer shapes from a Reshape whose shape tensor is external.)"""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(48, dtype=np.float32).reshape(16, 3) / 48, "W")
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=1), helper.make_node("MatMul", ["f", "W"], ["y0"])]
    if constant:
        bias = numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "b")
        nodes += [helper.make_node("Constant", [], ["b"], value=bias), helper.make_node("Add", ["y0", "b"], ["y"])]
    else:
        nodes += [helper.make_node("Identity", ["y0"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4, 4, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.parent.mkdir(parents=True, exist_ok=True)
    if location is None:
        onnx.save_model(model, str(path))
    else:
        location = location or path.name + ".data"
        (path.parent / location).parent.mkdir(parents=True, exist_ok=True)
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=0, convert_attribute=constant)
    return path


def relocate(path, location: str) -> None:
    """Rewrite every external `location` in the model file to `location` (the weights file stays put)."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = location
    path.write_bytes(m.SerializeToString())


def run(path) -> np.ndarray:
    import onnxruntime as ort

    x = np.linspace(0, 1, 2 * 16, dtype=np.float32).reshape(2, 4, 4, 1)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_the_files_a_model_names_are_found(tmp_path):
    m = tiny_onnx(tmp_path / "m.onnx")
    assert onnx_external.external_files(m) == [tmp_path / "m.onnx.data"]
    assert onnx_external.model_files(m) == [m, tmp_path / "m.onnx.data"]
    assert onnx_external.external_files(tiny_onnx(tmp_path / "inline.onnx", location=None)) == []
    # a Constant node's tensor can live outside too; a location in a subfolder is fine
    c = tiny_onnx(tmp_path / "c" / "c.onnx", location="weights/c.bin", constant=True)
    assert onnx_external.external_locations(c) == ["weights/c.bin"]
    import onnx

    proto = onnx.load(str(c), load_external_data=False)
    assert proto.graph.node[2].attribute[0].t.data_location == onnx.TensorProto.EXTERNAL


def test_copy_with_external_makes_a_copy_that_runs_elsewhere(tmp_path):
    m = tiny_onnx(tmp_path / "src" / "m.onnx", location="weights/all.bin", constant=True)
    expected = run(m)
    dest = onnx_external.copy_with_external(m, tmp_path / "out", "model.onnx")
    assert dest == tmp_path / "out" / "model.onnx"
    assert sorted(str(p.relative_to(dest.parent)) for p in dest.parent.rglob("*") if p.is_file()) == \
        ["model.onnx", "weights/all.bin"]
    os.rename(tmp_path / "src", tmp_path / "gone")  # the copy must not read the original's weights
    assert np.array_equal(run(dest), expected)
    # a file with no external data (or not ONNX at all) is copied alone
    t = tmp_path / "m.tflite"
    t.write_bytes(b"TFL3")
    assert onnx_external.copy_with_external(t, tmp_path / "t").read_bytes() == b"TFL3"
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["m.tflite"]


def test_hash_and_size_cover_the_external_weights(tmp_path):
    m = tiny_onnx(tmp_path / "m.onnx")
    data = tmp_path / "m.onnx.data"
    assert artifact.size_on_disk(m) == m.stat().st_size + data.stat().st_size
    before = artifact.content_hash(m)
    assert before == onnx_external.content_hash(m) != hashlib.sha256(m.read_bytes()).hexdigest()
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0xFF  # same model file, other weights: another model
    data.write_bytes(bytes(raw))
    assert artifact.content_hash(m) != before
    inline = tiny_onnx(tmp_path / "inline.onnx", location=None)  # no external data: the file's own sha256
    assert artifact.content_hash(inline) == hashlib.sha256(inline.read_bytes()).hexdigest()
    assert artifact.size_on_disk(inline) == inline.stat().st_size
    garbage = tmp_path / "garbage.onnx"  # not parseable: judged where it is loaded, hashed as bytes
    garbage.write_bytes(b"\x00not onnx")
    assert artifact.content_hash(garbage) == hashlib.sha256(b"\x00not onnx").hexdigest()


@pytest.mark.parametrize("location", ["../../etc/passwd", "/etc/passwd", "../outside.data", "a/../../b", ""])
def test_a_location_outside_the_models_folder_is_refused(tmp_path, location):
    m = tiny_onnx(tmp_path / "models" / "m.onnx")
    (tmp_path / "outside.data").write_bytes((tmp_path / "models" / "m.onnx.data").read_bytes())
    relocate(m, location)
    for read in (onnx_external.external_files, onnx_external.model_files, artifact.content_hash):
        with pytest.raises(BadModelFile, match="outside the model.s folder|names no file") as e:
            read(m)
        assert "\n" not in str(e.value)
    with pytest.raises(BadModelFile):
        onnx_external.copy_with_external(m, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()  # refused before anything was written


def test_a_link_out_of_the_folder_and_a_missing_file_are_refused(tmp_path):
    m = tiny_onnx(tmp_path / "models" / "m.onnx")
    data = tmp_path / "models" / "m.onnx.data"
    data.rename(tmp_path / "secret")
    with pytest.raises(BadModelFile, match="not a file beside the model"):
        onnx_external.external_files(m)
    data.symlink_to(tmp_path / "secret")
    with pytest.raises(BadModelFile, match="is a link to .*outside the model's folder"):
        onnx_external.external_files(m)
    # the Hugging Face cache: model and weights both link into one blobs/ folder
    blobs, snap = tmp_path / "hf" / "blobs", tmp_path / "hf" / "snapshots" / "rev"
    tiny_onnx(blobs / "m.onnx")
    snap.mkdir(parents=True)
    (snap / "m.onnx").symlink_to(blobs / "m.onnx")
    (snap / "m.onnx.data").symlink_to(blobs / "m.onnx.data")
    assert onnx_external.external_files(snap / "m.onnx") == [snap / "m.onnx.data"]


def test_the_web_runtime_turns_a_bad_location_into_a_row_result(tmp_path):
    from deploytool.runtimes.web import _onnx_external_data

    m = tiny_onnx(tmp_path / "m.onnx", location="w.bin")
    assert _onnx_external_data(m) == ["w.bin"]
    relocate(m, "/etc/passwd")
    with pytest.raises(StageFailed, match="outside the model's folder") as e:
        _onnx_external_data(m)
    assert e.value.status == "load_failed"


def test_a_sparse_weights_file_is_refused_before_it_is_copied_or_read(tmp_path):
    """A few bytes on disk can claim terabytes: copying such a file densely would fill the workspace's disk."""
    m = tiny_onnx(tmp_path / "models" / "m.onnx")
    data = tmp_path / "models" / "m.onnx.data"
    expected = run(m)
    with open(data, "r+b") as fh:  # the model's 192 bytes stay where it reads them; 1 TiB of holes after them
        fh.truncate(2**40)
    assert data.stat().st_blocks * 512 < 2**20  # really sparse on this filesystem
    for read in (onnx_external.external_files, onnx_external.model_files, artifact.content_hash,
                 artifact.size_on_disk):
        with pytest.raises(BadModelFile, match=r"is sparse \(1.02e\+03 GiB long") as e:
            read(m)
        assert "\n" not in str(e.value) and "cp --sparse=never" in str(e.value)
    with pytest.raises(BadModelFile):
        onnx_external.copy_with_external(m, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()  # refused before anything was written
    # a large file written densely is a model's data, and so is a small sparse one
    with open(data, "r+b") as fh:
        fh.truncate(192)
    assert np.array_equal(run(m), expected) and onnx_external.external_files(m) == [data]
    with open(data, "r+b") as fh:
        fh.truncate(onnx_external.SPARSE_MIN_BYTES)  # 64 MiB of holes: at the limit, not over it
    assert onnx_external.external_files(m) == [data]
    with open(data, "ab") as fh:
        fh.write(os.urandom(2**20) * (onnx_external.SPARSE_MIN_BYTES // 2**20 + 1))  # then 65 MiB written out
    assert onnx_external.external_files(m) == [data]


# ------------------------------------------------------------------ large files (issue 38, part 5)
def test_an_onnx_file_over_2_gib_in_itself_is_refused_in_one_line_before_it_is_read(tmp_path):
    """A real 2 GiB + 1 byte file (sparse: no disk spent); its bytes are never parsed, so what they hold is moot."""
    big = tmp_path / "big.onnx"
    with open(big, "wb") as f:
        f.truncate(onnx_external.PROTOBUF_LIMIT_BYTES + 1)
    with pytest.raises(BadModelFile) as e:
        onnx_external.external_locations(big)
    msg = str(e.value)
    assert "\n" not in msg and "2 GiB in one .onnx file" in msg and "save_as_external_data=True" in msg


def test_a_model_whose_weights_are_external_data_is_read_whatever_their_size(tmp_path):
    path = tmp_path / "m" / "model.onnx"
    tiny_onnx(path)
    assert onnx_external.external_locations(path) == ["model.onnx.data"]


def test_a_browser_row_of_a_model_over_2_gib_is_refused_before_a_browser_starts(tmp_path):
    from deploytool.artifact import Artifact
    from deploytool.runtimes.web import BROWSER_MAX_MODEL_BYTES, WebRuntime

    art = Artifact(path=tmp_path / "model.onnx", format="onnx", framework="onnx", layout="NHWC",
                   input_shape=(4, 4, 1), num_outputs=3, size_bytes=BROWSER_MAX_MODEL_BYTES + 1)
    rt = WebRuntime(backend="wasm")
    with pytest.raises(StageFailed) as e:
        rt.load(art)
    assert e.value.status == "unsupported" and "models over 2 GiB are not run in the browser" in e.value.reason
    assert rt._session is None  # no browser was started for it


def test_copying_over_a_shared_file_replaces_it_and_leaves_its_other_names_alone(tmp_path):
    t = tmp_path / "m.tflite"
    t.write_bytes(b"TFL3 new")
    (tmp_path / "t").mkdir()
    shared = tmp_path / "blob"
    shared.write_bytes(b"TFL3 old")
    os.link(shared, tmp_path / "t" / "m.tflite")  # a bundle's file linked to a blob (share_large_files)
    assert onnx_external.copy_with_external(t, tmp_path / "t").read_bytes() == b"TFL3 new"
    assert shared.read_bytes() == b"TFL3 old"
