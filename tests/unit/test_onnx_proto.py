"""onnx_proto reads what `onnx` would read of a model's I/O and external data,
without importing onnx; a user's .onnx is resolved without importing it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deploytool.modelfiles import onnx_proto
from tests.unit.test_onnx_external import tiny_onnx

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _onnx_view(path):
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    dims = lambda v: tuple(d.dim_value or None for d in v.type.tensor_type.shape.dim)
    return ([(i.name, dims(i)) for i in m.graph.input if i.name not in inits],
            [(o.name, dims(o)) for o in m.graph.output])


@pytest.mark.parametrize("location,constant", [(None, False), ("", False), ("w/weights.bin", True)])
def test_io_and_external_locations_agree_with_onnx(tmp_path, location, constant):
    path = tiny_onnx(tmp_path / "m.onnx", location=location, constant=constant)
    info = onnx_proto.read(path)
    inputs, outputs = _onnx_view(path)
    assert [(v.name, v.dims) for v in info.inputs] == inputs == [("x", (None, 4, 4, 1))]
    assert [(v.name, v.dims) for v in info.outputs] == outputs
    expected = [] if location is None else [location or "m.onnx.data"]
    assert list(info.external_locations) == expected


@pytest.mark.parametrize("data", [b"", b"\x08\x07garbage" * 10, b"\x3a\xff\xff\xff\x0f", b"\x08" + b"\xff" * 11])
def test_bytes_that_are_no_model_are_refused(tmp_path, data):
    p = tmp_path / "bad.onnx"
    p.write_bytes(data)
    with pytest.raises(onnx_proto.ProtoError):
        onnx_proto.read(p)


def test_a_users_onnx_is_resolved_without_importing_onnx(tmp_path):
    path = tiny_onnx(tmp_path / "in" / "m.onnx", location="")
    code = ("import sys\nfrom pathlib import Path\nfrom deploytool.run.usermodel import UserModelOptions, resolve\n"
            "from deploytool.workspace import Workspace\n"
            f"spec, art = resolve(Path({str(path)!r}), UserModelOptions(layout='NHWC'), Workspace.open({str(tmp_path / 'ws')!r}))\n"
            "print(spec.input_shape, art.layout, sorted(p.name for p in art.path.parent.iterdir()))\n"
            "assert 'onnx' not in sys.modules, 'onnx was imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(4, 4, 1) NHWC ['artifact.json', 'm.onnx', 'm.onnx.data']"
