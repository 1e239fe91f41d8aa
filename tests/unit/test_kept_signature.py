"""A user's .keras, SavedModel or .pt2 is read by importing TensorFlow or PyTorch (4-5 s of CPU here): the signature
read once is kept beside the model's copy in the workspace (modelfiles.reader.KeptSignature), and a run on the same
bytes starts without that import. The reader here is a counting stand-in (no framework in the unit tier); the .keras
file is a real zip with a config.json, so every check before the read runs."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from deploytool.modelfiles import reader
from deploytool.modelfiles.signature import Signature, output_spec, spec_of
from deploytool.run import usermodel
from deploytool.workspace import Workspace

SIG = Signature((spec_of("image", "float32", [None, 28, 28, 1]),), (output_spec("scores", "float32", [None, 10]),))


@pytest.fixture
def reads(monkeypatch):
    """The paths the (stand-in) reader was asked to read."""
    seen: list[tuple[Path, str]] = []

    def read(path, fmt):
        seen.append((Path(path), fmt))
        return SIG

    monkeypatch.setattr(usermodel, "read_signature", read)
    monkeypatch.setattr(usermodel, "open_workers", lambda: None)  # read here, whatever run another test left open
    return seen


def _keras_file(path: Path, config: str = "{}") -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", config)
        z.writestr("model.weights.h5", b"\0" * 64)
    return path


def _kept(ws: Workspace) -> list[Path]:
    return sorted((ws.root / "models").glob("user-*/signature.json"))


def test_a_second_run_on_the_same_bytes_does_not_read_the_model_again(tmp_path, reads):
    ws = Workspace.open(tmp_path / "ws")
    model = _keras_file(tmp_path / "m.keras")
    spec1, art1 = usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    spec2, art2 = usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    assert len(reads) == 1 and reads[0][1] == "keras"
    assert spec1.content_hash() == spec2.content_hash() and art1.sha256 == art2.sha256
    assert spec2.input_shape == (28, 28, 1) and spec2.num_classes == 10
    (kept,) = _kept(ws)
    assert kept.parent == art1.path.parent  # beside the model's copy, in the folder named by its content

    _keras_file(model, config='{"other": 1}')  # other bytes: another folder, read again
    usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    assert len(reads) == 2 and len(_kept(ws)) == 2


def test_a_kept_signature_of_another_reader_or_a_damaged_one_is_read_again(tmp_path, reads, monkeypatch):
    ws = Workspace.open(tmp_path / "ws")
    model = _keras_file(tmp_path / "m.keras")
    usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    (kept,) = _kept(ws)
    first = json.loads(kept.read_text())

    monkeypatch.setattr(reader, "_reader_key", lambda fmt: "an upgraded keras")  # new code or library versions
    usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    assert len(reads) == 2 and json.loads(kept.read_text())["key"] != first["key"]

    kept.write_text("{not json")
    usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    assert len(reads) == 3 and json.loads(kept.read_text())["signature"] == SIG.to_json()  # kept again, whole

    kept.write_text(json.dumps({"key": json.loads(kept.read_text())["key"], "signature": {"inputs": 5}}))
    usermodel.resolve(model, usermodel.UserModelOptions(), ws)
    assert len(reads) == 4


def test_the_key_names_the_bytes_the_code_and_the_libraries(tmp_path, monkeypatch):
    a = reader.KeptSignature(tmp_path / "s.json", "keras", "a" * 64)
    a.put(SIG)
    assert a.get() == SIG
    assert reader.KeptSignature(tmp_path / "s.json", "keras", "b" * 64).get() is None  # other bytes
    assert reader.KeptSignature(tmp_path / "s.json", "torch", "a" * 64).get() is None  # read by another library
    reader._reader_key.cache_clear()
    monkeypatch.setattr(reader, "package_version", lambda dist: "99.0")
    try:
        assert a.get() is None  # an upgraded keras or TensorFlow
    finally:
        reader._reader_key.cache_clear()


def test_formats_read_without_a_framework_keep_nothing(tmp_path):
    """An .onnx is read from its protobuf and a .tflite by LiteRT in milliseconds: nothing to keep."""
    for fmt in ("onnx", "tflite"):
        k = reader.KeptSignature(tmp_path / f"{fmt}.json", fmt, "a" * 64)
        k.put(SIG)
        assert k.get() is None and not (tmp_path / f"{fmt}.json").exists()


def test_a_model_the_checks_refuse_is_refused_before_anything_is_kept(tmp_path, reads):
    from deploytool.errors import BadModelFile

    ws = Workspace.open(tmp_path / "ws")
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip")
    with pytest.raises(BadModelFile, match="bad zip archive"):
        usermodel.resolve(bad, usermodel.UserModelOptions(), ws)
    assert not reads and not _kept(ws)
