"""Input kinds are registered strategies (deploytool.kinds): inference asks them in their order, each holds how the
bundled images become its samples, whether preprocessing applies and how PyTorch takes it, and the one-module kind
of tests/columns_kind.py flows through a manifest, the data loader and the zoo's shape checks."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

from deploytool import kinds, zoo
from deploytool.data import load_dataset
from deploytool.data.named import load_feeds
from deploytool.errors import SpecError, UnknownOption
from deploytool.kinds import KINDS, InputKind, get_kind, infer_kind, register_kind
from deploytool.modelfiles.signature import Signature, TensorSpec, spec_of
from deploytool.spec import ModelSpec, Preprocess, load_spec
from deploytool.zoo import plans


@pytest.fixture
def columns():
    """tests/columns_kind.py registered for the test (its kind and its architecture), and forgotten after it."""
    import tests.columns_kind as module

    importlib.reload(module)  # registers them (again, if another test imported it)
    yield module
    module.unregister()


@pytest.mark.parametrize("dtype, shape, quantized, kind", [
    ("int64", (None, 16), False, "tokens"), ("int32", (None, 16), False, "tokens"), ("bool", (None, 8), False, "tokens"),
    ("float32", (None, 28, 28, 1), False, "image"), ("float16", (1, 3, 32, 32), False, "image"),
    ("float32", (None, 28, 28), False, "sequence"), ("float32", (None, 13), False, "features"),
    ("float64", (None,), False, "features"), ("float32", (None, 2, 3, 4, 5), False, "features"),
    ("int8", (1, 28, 28, 1), True, "image"), ("int8", (1, 40), True, "features"), ("int8", (1, 40), False, "tokens"),
])
def test_inference_asks_the_kinds_in_their_order(dtype, shape, quantized, kind):
    assert infer_kind(dtype, shape, quantized) == kind
    assert spec_of("x", dtype, [d or -1 for d in shape], quantization=(0.5, 0) if quantized else None).kind == kind


def test_each_kind_reads_the_bundled_images_its_own_way():
    x = np.arange(2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)  # N, H, W, C
    assert get_kind("image").from_images(x) is x and get_kind("image").from_hwc((3, 4, 2)) == (3, 4, 2)
    seq = get_kind("sequence").from_images(x)
    assert seq.shape == (2, 3, 8) and np.array_equal(seq[1, 2], x[1, 2].ravel())  # a step is one row
    assert get_kind("features").from_images(x).shape == (2, 24)
    with pytest.raises(SpecError, match="input kind 'tokens' cannot be read from the bundled image datasets"):
        get_kind("tokens").from_hwc((28, 28, 1))
    assert [k for k in kinds.names() if get_kind(k).preprocessed] == ["image"]
    assert {k: get_kind(k).torch_layout for k in kinds.names()} == {
        "tokens": "NHWC", "image": "NCHW", "sequence": "NHWC", "features": "NHWC"}


def test_only_a_kind_that_is_preprocessed_gets_scale_mean_and_std(tmp_path):
    sig = Signature((TensorSpec("img", "float32", (None, 2, 2, 1), "image"),
                     TensorSpec("feat", "float32", (None, 4), "features")),
                    (TensorSpec("y", "float32", (None, 2)),))
    a = np.full((3, 2, 2, 1), 255, np.float32)
    np.savez(tmp_path / "t.npz", img=a, feat=np.full((3, 4), 255, np.float32))
    x, *_ = load_feeds(tmp_path / "t.npz", sig, Preprocess(1 / 255, (0.5,), (0.5,)))
    assert np.allclose(x["img"], 1.0) and np.all(x["feat"] == 255)


def test_a_kind_and_an_architecture_of_their_own_flow_through_a_manifest_the_data_and_the_zoo(columns, tmp_path):
    assert columns.NAME in kinds.names() and infer_kind("float32", (None, 28, 28)) == "sequence"  # named, not inferred
    manifest = Path(load_spec("gru").source).read_text().replace('architecture = "gru"',
                                                                 f'architecture = "{columns.ARCH}"')
    (tmp_path / "cols.toml").write_text(manifest)
    spec = load_spec(str(tmp_path / "cols.toml"))
    assert isinstance(spec, ModelSpec) and spec.input_kind == columns.NAME and spec.model_input_shape == (28, 28)
    ds = load_dataset(spec, limit_train=4, limit_test=3)
    plain = load_dataset(load_spec("gru"), limit_train=4, limit_test=3)  # the same digits, rows as steps
    assert isinstance(ds.x_test, np.ndarray) and isinstance(plain.x_test, np.ndarray)  # the zoo's one array
    assert ds.x_test.shape == plain.x_test.shape == (3, 28, 28)
    assert np.array_equal(ds.x_test, plain.x_test.transpose(0, 2, 1))  # a step is one column
    assert zoo.trace_shapes(columns.ARCH, zoo.layer_plan(columns.ARCH, 10), (8, 5, 3)) == [(16,), (10,)]
    assert plans.input_shape_of(columns.ARCH, (8, 5, 3)) == (5, 24)


def test_an_unknown_kind_or_layout_is_refused_by_name():
    with pytest.raises(UnknownOption, match="architecture 'never_registered' reads an unknown input kind 'pixels'; "
                                            "input kinds are tokens, image, sequence, features"):
        plans.register_architecture("never_registered", reads="pixels")
    assert "never_registered" not in zoo.ARCHITECTURES
    with pytest.raises(UnknownOption, match="^unknown input kind 'pixels'; input kinds are tokens, image, sequence, "
                                            "features$"):
        get_kind("pixels")  # the registry's one refusal (Registry.lookup), as for an unknown task

    class Sideways(InputKind):
        name = "sideways"
        torch_layout = "NWHC"

    with pytest.raises(UnknownOption, match="torch_layout must be NCHW or NHWC"):
        register_kind(Sideways())
    assert "sideways" not in KINDS


def test_a_plugin_kind_and_architecture_load_in_a_deploytool_process(tmp_path):
    """Named in $DEPLOYTOOL_PLUGINS, tests/columns_kind.py is imported by the first registry lookup of a process,
    while deploytool.zoo may still be registering its own architectures: both end registered, in order."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = ("from deploytool.spec import load_spec\n"
            "from deploytool import zoo\n"
            "print(load_spec('gru').input_kind, list(zoo.ARCHITECTURES)[-1], zoo.plans.input_kind_of('gru_columns'))")
    env = {**os.environ, "DEPLOYTOOL_PLUGINS": "tests.columns_kind",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["sequence", "gru_columns", "<input", "kind", "columns>"]
