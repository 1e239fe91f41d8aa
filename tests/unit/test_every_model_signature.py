"""Issue 37, one data path: every artifact carries its signature (a model file's own, or the one a model made here
from one array implies), rows are laid out alike, and one check holds a model file's inputs to its signature on
every runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deploytool.artifact import IMPLIED_INPUT, IMPLIED_OUTPUT, Artifact, implied_signature
from deploytool.errors import StageFailed
from deploytool.modelfiles.signature import Signature, TensorSpec
from deploytool.runtimes.base import _fitted, check_file_inputs


def _art(**kw: object) -> Artifact:
    fields: dict = dict(path=Path("m.tflite"), format="tflite", framework="keras", layout="NHWC",
                        input_shape=(8, 8, 1), num_outputs=10)
    return Artifact(**{**fields, **kw})


def test_an_artifact_made_without_a_signature_carries_the_one_its_fields_imply_and_writes_it_as_before(tmp_path):
    art = _art()
    assert art.signature == implied_signature((8, 8, 1), 10)
    assert art.signature.inputs[0] == TensorSpec(IMPLIED_INPUT, "float32", (None, 8, 8, 1))
    assert art.signature.outputs[0] == TensorSpec(IMPLIED_OUTPUT, "float32", (None, 10))
    art.save(tmp_path / "artifact.json")
    assert "signature" not in json.loads((tmp_path / "artifact.json").read_text())  # its key reads as it did
    assert Artifact.load(tmp_path / "artifact.json").signature == art.signature


def test_a_model_files_own_signature_is_kept_and_written(tmp_path):
    own = Signature((TensorSpec("pixels", "int8", (1, 8, 8, 1), quantization=(0.5, -3)),),
                    (TensorSpec("logits", "float32", (1, 10)),))
    art = _art(signature=own)
    assert art.signature == own
    art.save(tmp_path / "artifact.json")
    assert json.loads((tmp_path / "artifact.json").read_text())["signature"]["inputs"][0]["name"] == "pixels"
    assert Artifact.load(tmp_path / "artifact.json").signature == own


def test_inputs_are_fitted_to_their_tensor_float_data_cast_integers_kept_shapes_checked():
    image = TensorSpec("x", "float32", (None, 2, 3))
    got = _fitted(image, np.ones((4, 2, 3), np.float64))
    assert got.dtype == np.float32 and got.flags.c_contiguous
    quantized = TensorSpec("q", "int8", (None, 2, 3), quantization=(0.1, 0))
    assert _fitted(quantized, np.ones((4, 2, 3), np.float64)).dtype == np.float32  # the runtime quantizes it
    ids = TensorSpec("ids", "int64", (None, None))
    assert _fitted(ids, np.ones((4, 7), np.int32)).dtype == np.int32  # integers go as given
    with pytest.raises(ValueError, match=r"inputs x have shape \(3, 2\), the model expects \(2, 3\)"):
        _fitted(image, np.ones((4, 3, 2), np.float32))
    with pytest.raises(ValueError, match="the model expects"):
        _fitted(image, np.ones((4, 2, 3, 1), np.float32))  # another rank
    assert _fitted(TensorSpec("s", "float32", (None, None, 4)), np.ones((2, 9, 4))).shape == (2, 9, 4)  # open dim


def test_a_files_inputs_are_held_to_the_signature_alike_for_every_model():
    sig = Signature((TensorSpec("x", "float32", (None, 8, 8, 1)), TensorSpec("ids", "int64", (None, None))),
                    (TensorSpec("y", "float32", (None, 10)),))
    pairs = {"x": "serving_x:0", "ids": "serving_ids:0"}
    ok = {"serving_x:0": TensorSpec("serving_x:0", "int8", (None, 8, 8, 1), quantization=(0.1, 0)),
          "serving_ids:0": TensorSpec("serving_ids:0", "int32", (1, 12))}
    check_file_inputs(sig, pairs, ok)  # a quantized tensor takes float data; an open length takes any
    with pytest.raises(StageFailed) as e:
        check_file_inputs(sig, pairs, {**ok, "serving_x:0": TensorSpec("serving_x:0", "int8", (None, 8, 8, 1))})
    assert e.value.status == "unsupported" and "without quantization parameters" in e.value.reason
    with pytest.raises(StageFailed) as e:
        check_file_inputs(sig, pairs, {**ok, "serving_x:0": TensorSpec("serving_x:0", "float32", (1, 8, 9, 1))})
    assert e.value.status == "load_failed"
    assert "input serving_x:0 is [1, 8, 9, 1] but the artifact says one sample is [8, 8, 1]" in e.value.reason
    with pytest.raises(StageFailed) as e:  # an input the signature does not name could not be fed
        check_file_inputs(sig, pairs, {**ok, "extra": TensorSpec("extra", "float32", (None, 3))})
    assert e.value.status == "unsupported" and "takes 3 inputs" in e.value.reason and "names 2 (x, ids)" in e.value.reason



def test_a_bundles_readme_says_what_its_one_input_holds_whatever_the_model():
    from deploytool.bugs.bundle import _one_input

    image = {"layout": "NHWC", "inputs": {"input": {"dtype": "float32", "shape": [4, 28, 28, 1]}}}
    assert _one_input(image) == "float32 [4, 28, 28, 1], layout NHWC"
    tokens = {"layout": "NHWC", "inputs": {"input_ids": {"dtype": "int64", "shape": [4, 16]}}}
    assert _one_input(tokens) == "int64 [4, 16]"  # a sequence of ids has no image layout
    assert _one_input({"layout": "NCHW"}) == "float32, layout NCHW"  # a bundle.json written before inputs were listed
