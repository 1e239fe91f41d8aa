"""The pure rules of quantized I/O and converter layouts: a quantized integer tensor takes float data (and an
integer one without a scale takes integers), its runtimes quantize and dequantize with its scale and zero point
and say so in the same words, a source that itself computes in integers is judged by the quantized tolerances,
an output a converter made channels-last is laid out channels-first again (ranks 3 and 4) and one whose shape
cannot tell is named, a program exported at a fixed batch runs padded to it, and a shape mismatch prints whole
shapes. The real runtimes run these rules in tests/integration/test_quantized_io_layouts.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deploytool.artifact import Artifact
from deploytool.convert._onnx2tf import channels_last_names, layout_notes
from deploytool.data.feed import Feed, channels_last, layout_unknown, pad_batch, restore_channels_first
from deploytool.data.named import load_feeds
from deploytool.errors import DataError
from deploytool.modelfiles.signature import Signature, TensorSpec, output_spec, spec_of
from deploytool.modelfiles.tflite_io import TensorQuant, quantization_notes
from deploytool.run.compare import output_comparison
from deploytool.spec import Preprocess
from deploytool.tasks import TASKS
from deploytool.tolerances import DEFAULT_TOLERANCES, source_tolerances


def test_a_quantized_integer_input_takes_floats_and_one_without_a_scale_takes_token_ids():
    image = spec_of("image", "int8", [None, 8, 8, 1], quantization=(0.0039, -128))
    assert image.is_float and image.kind == "image" and image.quantization == (0.0039, -128)
    assert "quantized: scale 0.0039, zero point -128" in image.describe()
    frames = spec_of("frames", "uint8", [None, 1, 800], quantization=(0.02, 128))
    assert frames.is_float and frames.kind == "sequence"
    ids = spec_of("ids", "int8", [None, 12], quantization=(0.0, 0))  # TFLite's (0.0, 0): not quantized
    assert not ids.is_float and ids.kind == "tokens" and ids.quantization is None
    mask = spec_of("mask", "int32", [None, 12], quantization=(0.5, 0))  # only 8/16-bit integers are quantized
    assert mask.quantization is None and mask.kind == "tokens"


def test_a_signature_with_a_quantized_tensor_computes_in_integers_and_keeps_it_through_json():
    sig = Signature((spec_of("image", "int8", [None, 8, 8, 1], quantization=(0.0039, -128)),),
                    (output_spec("digit", "int8", [None, 10], (0.13, 43)),))
    assert sig.quantized
    again = Signature.from_json(sig.to_json())
    assert again == sig and again.outputs[0].quantization == (0.13, 43)
    plain = Signature((spec_of("x", "float32", [None, 4]),), (output_spec("y", "float32", [None, 2]),))
    assert not plain.quantized and "quantization" not in plain.to_json()["inputs"][0]


def test_float_data_feeds_a_quantized_input_and_is_refused_by_an_integer_one(tmp_path):
    sig = Signature((spec_of("image", "int8", [None, 8, 8, 1], quantization=(1 / 255, -128)),),
                    (output_spec("digit", "int8", [None, 10], (0.13, 43)),))
    x = np.random.default_rng(0).random((6, 8, 8, 1), dtype=np.float32)
    np.savez(tmp_path / "float.npz", x=x, y=np.arange(6))
    feed, y, _, _ = load_feeds(tmp_path / "float.npz", sig, Preprocess())
    assert feed["image"].dtype == np.float32 and np.array_equal(feed["image"], x)  # the runtime quantizes it
    tokens = Signature((spec_of("ids", "int8", [None, 8]),), (output_spec("y", "float32", [None, 2]),))
    np.savez(tmp_path / "ids.npz", x=x.reshape(6, -1)[:, :8])
    with pytest.raises(DataError, match="holds float32 but the model takes int8"):
        load_feeds(tmp_path / "ids.npz", tokens, Preprocess())


def test_quantize_and_dequantize_use_the_tensors_scale_and_zero_point_and_every_runtime_says_so():
    q_in = TensorQuant("serving_default_image:0", "int8", (1, 8, 8, 1), 1 / 255, -128)
    q_out = TensorQuant("StatefulPartitionedCall:0", "int8", (1, 10), 0.13, 43)
    x = np.linspace(0, 1, 64, dtype=np.float32).reshape(1, 8, 8, 1)
    q = q_in.quantize(x)
    assert q.dtype == np.int8 and q.min() == -128 and q.max() == 127
    assert np.abs(q_in.dequantize(q) - x).max() <= q_in.scale / 2 + 1e-7  # half a step at most
    assert np.allclose(q_out.dequantize(np.array([[43, 44]], np.int8)), [[0.0, 0.13]])
    floats = TensorQuant("x", "float32", (1, 4), 0.0, 0)
    assert quantization_notes([floats], [floats]) == []
    notes = quantization_notes([q_in], [q_out])
    assert notes == ["int8 model input image: float data quantized with the tensor's scale 0.00392157 and zero "
                     "point -128",
                     "int8 model output StatefulPartitionedCall: dequantized with its scale 0.13 and zero point 43 "
                     "before comparison"]


def test_a_source_that_computes_in_integers_is_judged_by_the_quantized_tolerances_on_every_row():
    tol = source_tolerances(DEFAULT_TOLERANCES, quantized_source=True)
    assert tol["none"] == tol["quantized"] == DEFAULT_TOLERANCES["quantized"]
    assert "max_abs_error" not in tol["none"]  # one output step between two kernels is not a failure
    raw = source_tolerances(TASKS["raw"].tolerances, quantized_source=True)
    assert raw["none"] == TASKS["raw"].tolerances["quantized"]
    plain = source_tolerances(DEFAULT_TOLERANCES, quantized_source=False)
    assert plain == DEFAULT_TOLERANCES and plain["none"] is not DEFAULT_TOLERANCES["none"]  # copies


@pytest.mark.parametrize("source, file", [((4, 198), (198, 4)), ((2, 16, 16), (16, 16, 2)),
                                          ((3, 8, 8, 8), (8, 8, 8, 3))])
def test_an_output_made_channels_last_is_laid_out_channels_first_again(source, file):
    assert channels_last(source, file) and not layout_unknown(source, file)
    rng = np.random.default_rng(1)
    want = rng.normal(size=(5, *source)).astype(np.float32)
    as_file = np.moveaxis(want, 1, -1).copy()  # what LiteRT gives: the file's channels-last shape
    flat = as_file.reshape(5, -1)  # what a page posts: the same values, flat
    fixed = restore_channels_first(Feed({"out": as_file, "flat": flat, "other": as_file}), ["out", "flat"],
                                   {"out": source, "flat": source, "other": source})
    assert np.array_equal(fixed["out"], want) and np.array_equal(fixed["flat"], want)
    assert np.array_equal(fixed["other"], as_file)  # not named: as it came


@pytest.mark.parametrize("source, file", [((6,), (6,)), ((16, 32), (16, 32)), ((2, 16, 16), (2, 16, 16)),
                                          ((4, 198), (4, 199))])
def test_an_output_the_converter_left_alone_is_not_moved(source, file):
    assert not channels_last(source, file)


def _artifact(outputs: tuple[TensorSpec, ...]) -> Artifact:
    sig = Signature((spec_of("image", "float32", [None, 3, 16, 16]),), outputs)
    return Artifact(path=Path("model.onnx"), format="onnx", framework="onnx", layout="NHWC", input_shape=(3, 16, 16),
                    num_outputs=0, signature=sig)


def test_onnx2tf_outputs_are_paired_by_name_and_a_shape_that_cannot_tell_is_named_in_a_note():
    source = _artifact((output_spec("mask", "float32", [None, 2, 16, 16]),
                        output_spec("cube", "float32", [None, 4, 4, 4]), output_spec("logits", "float32", [None, 6])))
    files: dict[str, tuple[int | None, ...]] = {"mask": (16, 16, 2), "cube": (4, 4, 4), "logits": (6,)}
    assert channels_last_names(source, files) == ["mask"]
    (note,) = layout_notes(source, files)
    assert note.startswith("output cube is [4, 4, 4] per sample in the source and in the file")
    assert layout_unknown((4, 4, 4), (4, 4, 4)) and not layout_unknown((4, None), (4, None))
    assert channels_last_names(source, {}) == [] and layout_notes(source, {"other": (1,)}) == ()


def test_a_batch_is_padded_to_a_fixed_batch_with_zero_samples_after_its_own():
    x = np.ones((3, 1, 4), np.float32)
    padded = pad_batch(Feed.one("x", x), 5)["x"]
    assert padded.shape == (5, 1, 4) and np.array_equal(padded[:3], x) and not padded[3:].any()
    feed = pad_batch(Feed({"a": x, "ids": np.ones((3, 2), np.int64)}), 4)
    assert isinstance(feed, Feed) and len(feed) == 4 and feed["ids"].dtype == np.int64
    assert not feed["ids"][3:].any() and np.array_equal(feed["ids"][:3], np.ones((3, 2), np.int64))
    same = Feed.one("x", x)
    assert pad_batch(same, 3) is same


def test_outputs_that_differ_only_in_their_batch_print_whole_shapes():
    with pytest.raises(ValueError, match=r"output 'linear' has shape \(1, 6\), the baseline's \(24, 6\)"):
        output_comparison("linear", np.zeros((1, 6)), np.zeros((24, 6)))
