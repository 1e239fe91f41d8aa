"""A user's model file that is hostile or broken: a .pt2 whose pickles carry a
payload must never run it (the payload would create a marker file), a
SavedModel written by Keras 3 must migrate, and a damaged .pt2 or .keras must
give one clean line through the CLI. The hostile files are crafted here from a
real torch.export.save archive; the payload is a harmless `Path.touch`."""

from __future__ import annotations

import io
import json
import pathlib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from deploytool.errors import BadModelFile
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files


class TouchOnUnpickle:
    """Unpickling this runs Path(marker).touch(): the stand-in for any code a pickle can run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def tiny_pt2(path: Path) -> Path:
    """A small NCHW 1x8x8 -> 10 classifier with a dynamic batch, saved by torch.export.save."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c = torch.nn.Conv2d(1, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4 * 4 * 4, 10)

        def forward(self, x):
            return self.fc(torch.flatten(torch.nn.functional.max_pool2d(torch.relu(self.c(x)), 2), 1))

    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(Net().eval(), (torch.zeros(2, 1, 8, 8),), dynamic_shapes=({0: batch},))
    torch.export.save(program, str(path))
    return path


def rewrite(src: Path, dst: Path, change: dict[str, bytes | None]) -> Path:
    """A copy of the archive with members (by their name below the archive's root folder) replaced, added or
    (None) removed."""
    with zipfile.ZipFile(src) as zin:
        root = zin.namelist()[0].split("/")[0]
        members = {i.filename: zin.read(i.filename) for i in zin.infolist()}
    for name, data in change.items():
        if data is None:
            members.pop(f"{root}/{name}")
        else:
            members[f"{root}/{name}"] = data
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    return dst


def _payload(marker: Path) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save((TouchOnUnpickle(marker),), buf)
    return buf.getvalue()


def _config(src: Path, name: str) -> dict:
    with zipfile.ZipFile(src) as z:
        return json.loads(z.read(next(n for n in z.namelist() if n.endswith(name))))


def evil_sample_inputs(src: Path, dst: Path, marker: Path) -> Path:
    return rewrite(src, dst, {"data/sample_inputs/model.pt": _payload(marker)})


def evil_weight(src: Path, dst: Path, marker: Path) -> Path:
    """fc.bias declared as a pickled weight whose pickle is the payload."""
    config = _config(src, "model_weights_config.json")
    config["config"]["fc.bias"].update(path_name="weight_evil", use_pickle=True)
    return rewrite(src, dst, {"data/weights/model_weights_config.json": json.dumps(config).encode(),
                              "data/weights/weight_evil": _payload(marker)})


def evil_constant(src: Path, dst: Path, marker: Path) -> Path:
    """An extra 'opaque object' constant: torch.export.load hands its bytes to pickle.loads."""
    import pickle

    config = {"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True,
                                  "tensor_meta": None}}}
    return rewrite(src, dst, {"data/constants/model_constants_config.json": json.dumps(config).encode(),
                              "data/constants/opaque_obj_0": pickle.dumps(TouchOnUnpickle(marker))})


def evil_legacy_weights(src: Path, dst: Path, marker: Path) -> Path:
    """The torch 2.6/2.7 layout: one pickled state dict, which torch unpickles with weights_only=False."""
    return rewrite(src, dst, {"data/weights/model.pt": _payload(marker)})


EVIL = {"sample_inputs": evil_sample_inputs, "weight": evil_weight, "constant": evil_constant,
        "legacy_weights": evil_legacy_weights}


@pytest.fixture(scope="module")
def clean_pt2(tmp_path_factory) -> Path:
    return tiny_pt2(tmp_path_factory.mktemp("pt2") / "clean.pt2")


@pytest.fixture(scope="module")
def digits_npz(tmp_path_factory) -> Path:
    from sklearn.datasets import load_digits

    d = load_digits()
    path = tmp_path_factory.mktemp("data") / "digits.npz"
    x = d.images[..., None].astype(np.float32) / 16.0
    np.savez(path, x=x[:200], y=d.target[:200], x_train=x[200:400], y_train=d.target[200:400])
    return path


def _cli_error_line(r) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    return lines[0]


@pytest.mark.parametrize("member", sorted(EVIL))
def test_no_pickle_in_a_pt2_runs_code(clean_pt2, tmp_path, member):
    """torch.export.load runs each payload (so the file is a live threat); deploytool's loader runs none."""
    import torch

    from deploytool.modelfiles import pt2

    marker = tmp_path / "PWNED"
    evil = EVIL[member](clean_pt2, tmp_path / f"evil_{member}.pt2", marker)
    try:
        torch.export.load(str(evil))
    except Exception:
        pass
    assert marker.exists(), f"the crafted {member} payload is not live; the test proves nothing"
    marker.unlink()

    if member == "sample_inputs":
        # Sample inputs are never read, so the program itself loads and is the clean one.
        program = pt2.load_program(evil)
        x = torch.randn(5, 1, 8, 8)
        assert torch.equal(program.module()(x), pt2.load_program(clean_pt2).module()(x))
        assert pt2.input_shape(program, evil) == [None, 1, 8, 8] and pt2.output_size(program, evil) == 10
    else:
        with pytest.raises(BadModelFile, match=str(evil)):
            pt2.load_program(evil)
    assert not marker.exists()


def test_a_graph_that_calls_a_python_function_is_refused(clean_pt2, tmp_path):
    """The graph is data too: a node naming torch.os.getcwd instead of an operator never becomes a program."""
    from deploytool.modelfiles import pt2

    with zipfile.ZipFile(clean_pt2) as z:
        text = z.read(next(n for n in z.namelist() if n.endswith("models/model.json"))).decode()
    assert '"torch.ops.aten.relu.default"' in text
    bad = rewrite(clean_pt2, tmp_path / "calls.pt2",
                  {"models/model.json": text.replace('"torch.ops.aten.relu.default"', '"torch.os.getcwd"').encode()})
    with pytest.raises(BadModelFile, match="getcwd"):
        pt2.load_program(bad)


def test_pickled_tensor_weights_still_load(clean_pt2, tmp_path):
    """A weight stored as a pickle (torch.export.save does this for tensor subclasses) is read with
    weights_only=True and gives the same program."""
    import torch

    from deploytool.modelfiles import pt2

    config = _config(clean_pt2, "model_weights_config.json")
    clean = pt2.load_program(clean_pt2)
    buf = io.BytesIO()
    torch.save(clean.state_dict["fc.bias"], buf)  # a Parameter, as torch.export.save pickles one
    config["config"]["fc.bias"].update(path_name="weight_pickled", use_pickle=True)
    pickled = rewrite(clean_pt2, tmp_path / "pickled.pt2",
                      {"data/weights/model_weights_config.json": json.dumps(config).encode(),
                       "data/weights/weight_pickled": buf.getvalue()})
    x = torch.randn(3, 1, 8, 8)
    assert torch.equal(pt2.load_program(pickled).module()(x), clean.module()(x))


def test_zoo_pt2_loads_with_identical_outputs(tmp_path):
    """The zoo's own export path (train.export_torch) reads back to the very same outputs as torch's loader."""
    import torch

    from deploytool import zoo
    from deploytool.modelfiles import pt2
    from deploytool.runtimes.torch import load_exported
    from deploytool.train.fit import export_torch

    torch.manual_seed(0)
    model = zoo.build_torch("lenet5", (28, 28, 1), 10).eval()
    path = tmp_path / "model.pt2"
    export_torch(model, (1, 28, 28), path)
    x = torch.randn(7, 1, 28, 28)
    with torch.inference_mode():
        ours, theirs, eager = load_exported(str(path))(x), torch.export.load(str(path)).module()(x), model(x)
    assert torch.equal(ours, theirs) and torch.allclose(ours, eager, atol=1e-5)
    assert pt2.input_shape(pt2.load_program(path), path) == [None, 1, 28, 28]


def test_migrate_a_pt2_with_a_payload_in_its_sample_inputs(clean_pt2, digits_npz, tmp_path):
    """Through the CLI the payload never runs; the program is read without its sample inputs and migrated."""
    marker = tmp_path / "PWNED"
    evil = evil_sample_inputs(clean_pt2, tmp_path / "evil.pt2", marker)
    r = run_cli("migrate", "--model", str(evil), "--data", str(digits_npz), "--target", "host", "--format", "onnx",
                "--quantize", "none", "--workspace", str(tmp_path / "ws"), "--quiet", "--latency-samples", "5")
    assert not marker.exists(), "the payload ran"
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if " host " in line]
    assert len(rows) == 1 and "100.00%" in rows[0] and "pass" in rows[0], r.stdout


def test_migrate_refuses_a_pt2_with_a_payload_in_its_weights(clean_pt2, digits_npz, tmp_path):
    marker = tmp_path / "PWNED"
    evil = evil_weight(clean_pt2, tmp_path / "evil.pt2", marker)
    r = run_cli("migrate", "--model", str(evil), "--data", str(digits_npz), "--target", "host", "--format", "onnx",
                "--workspace", str(tmp_path / "ws"), "--quiet")
    assert not marker.exists(), "the payload ran"
    line = _cli_error_line(r)
    assert "evil.pt2" in line and "never unpickles" in line, line


@pytest.mark.parametrize("damage", ["garbage", "truncated", "broken_graph"])
def test_a_corrupt_pt2_is_one_line(clean_pt2, digits_npz, tmp_path, damage):
    bad = tmp_path / "corrupt.pt2"
    if damage == "garbage":
        bad.write_bytes(b"\x00not a model\xff" * 100)
    elif damage == "truncated":
        bad.write_bytes(clean_pt2.read_bytes()[: clean_pt2.stat().st_size // 2])
    else:
        rewrite(clean_pt2, bad, {"models/model.json": b'{"graph_module": {"graph": '})
    r = run_cli("migrate", "--model", str(bad), "--data", str(digits_npz), "--format", "onnx",
                "--workspace", str(tmp_path / "ws"), "--quiet")
    line = _cli_error_line(r)
    assert "corrupt.pt2" in line and "not a readable .pt2 file" in line and "torch.export.save" in line, line


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_keras_file_is_named_as_such(digits_npz, tmp_path, damage):
    bad = tmp_path / "corrupt.keras"
    if damage == "garbage":
        bad.write_bytes(b"\x00not a model\xff" * 100)
    else:  # a real zip, cut short: the first bytes look like a .keras archive
        real = tmp_path / "real.zip"
        with zipfile.ZipFile(real, "w") as z:
            z.writestr("config.json", "{}" * 500)
            z.writestr("model.weights.h5", b"\x00" * 4000)
        bad.write_bytes(real.read_bytes()[:3000])
    r = run_cli("migrate", "--model", str(bad), "--data", str(digits_npz), "--format", "tflite",
                "--workspace", str(tmp_path / "ws"), "--quiet")
    line = _cli_error_line(r)
    assert "corrupt.keras: not a readable .keras file" in line and "model.save('model.keras')" in line, line
    assert "not found" not in line.lower(), line


def test_migrate_a_keras3_saved_model_directory(digits_npz, tmp_path):
    """A SavedModel written by Keras 3's model.export(dir) is run by the PC baseline and both converters."""
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                              keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])
    saved = tmp_path / "my_saved_model"
    model.export(str(saved), verbose=False)
    r = run_cli("migrate", "--model", str(saved), "--data", str(digits_npz), "--target", "host",
                "--format", "onnx,tflite", "--quantize", "none", "--workspace", str(tmp_path / "ws"), "--quiet",
                "--latency-samples", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if " host " in line]
    assert len(rows) == 2, r.stdout
    for row in rows:
        assert "100.00%" in row and "pass" in row, r.stdout
