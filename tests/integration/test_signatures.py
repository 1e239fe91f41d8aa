"""A model's I/O signature read from every source format: names, dtypes, open dimensions and the kind of each
input, on the tiny models of tests/anymodels.py and a TFLite model converted from one of them."""

from __future__ import annotations

import pytest

from deploytool.modelfiles.reader import canonical_name, read_signature
from tests import anymodels

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files


def test_an_onnx_text_classifier_has_two_int64_token_inputs(tmp_path):
    sig = read_signature(anymodels.onnx_text_classifier(tmp_path / "t.onnx"), "onnx")
    assert [(t.name, t.dtype, t.shape, t.kind) for t in sig.inputs] == [
        ("input_ids", "int64", (None, 12), "tokens"), ("attention_mask", "int64", (None, 12), "tokens")]
    assert [(t.name, t.dtype, t.shape) for t in sig.outputs] == [("logits", "float32", (None, 3))]
    assert not sig.image_classifier and not sig.all_float_inputs
    open_len = read_signature(anymodels.onnx_text_classifier(tmp_path / "o.onnx", seq=None), "onnx")
    assert open_len.inputs[0].shape == (None, None)


def test_keras_models_their_tflite_and_savedmodel_say_the_same(tmp_path):
    mlp = read_signature(anymodels.keras_regression_mlp(tmp_path / "r.keras", epochs=1), "keras")
    assert [(t.name, t.dtype, t.shape, t.kind) for t in mlp.inputs] == [("features", "float32", (None, 16), "features")]
    assert [(t.dtype, t.shape) for t in mlp.outputs] == [("float32", (None, 1))]
    lstm = read_signature(anymodels.keras_lstm(tmp_path / "l.keras"), "keras")
    assert lstm.inputs[0].kind == "sequence" and lstm.inputs[0].shape == (None, 10, 6)
    two = read_signature(anymodels.keras_two_outputs(tmp_path / "two.keras"), "keras")
    assert [(t.name, t.shape) for t in two.outputs] == [("scores", (None, 5)), ("value", (None, 1))]

    from deploytool.proc.quiet import import_tensorflow

    tf = import_tensorflow()
    import keras

    model = keras.saving.load_model(tmp_path / "two.keras")
    model.export(str(tmp_path / "sm"))
    sm = read_signature(tmp_path / "sm", "saved_model")
    assert [t.shape for t in sm.inputs] == [(None, 16)] and sorted(t.shape for t in sm.outputs) == [(None, 1), (None, 5)]
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"))
    (tmp_path / "two.tflite").write_bytes(converter.convert())
    lite = read_signature(tmp_path / "two.tflite", "tflite")
    assert [(t.dtype, t.shape) for t in lite.inputs] == [("float32", (None, 16))]
    assert sorted(t.shape for t in lite.outputs) == [(None, 1), (None, 5)]


def test_a_pt2_program_with_two_inputs(tmp_path):
    sig = read_signature(anymodels.torch_two_inputs(tmp_path / "m.pt2"), "torch")
    assert [(t.name, t.shape, t.kind) for t in sig.inputs] == [("image", (None, 1, 8, 8), "image"),
                                                               ("extra", (None, 4), "features")]
    assert [(t.dtype, t.shape) for t in sig.outputs] == [("float32", (None, 3))]


def test_converter_decorations_are_taken_off_names():
    assert canonical_name("serving_default_input_ids:0") == "input_ids"
    assert canonical_name("StatefulPartitionedCall:1") == "StatefulPartitionedCall"
    assert canonical_name("x") == "x"
