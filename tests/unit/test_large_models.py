"""Models past 2 GiB: a TFLite file (a FlatBuffer, 2 GiB at most) the weights cannot fit in is refused before any
converter runs, naming the quantizations that would fit; ONNX quantization keeps a large model's weights as
external data (quant_pre_process's float copy could not be one protobuf), in the call and in its reproducer."""

from __future__ import annotations

import pytest

from deploytool import convert
from deploytool.convert import onnx_quant
from deploytool.errors import StageFailed
from tests import results as factory

GIB = 2**30


def test_a_tflite_file_the_weights_cannot_fit_is_refused_naming_what_would_fit():
    big = factory.artifact("/ws/models/big.onnx", "onnx", size_bytes=int(2.15 * GIB))
    with pytest.raises(StageFailed, match=r"FlatBuffer of at most 2 GiB; this model's 2\.15 GiB make about 2\.15 GiB "
                                          r"at --quantize none: --quantize fp16 or dynamic or int8 or int8-io would fit"
                       ) as e:
        convert.refuse_oversized(big, "tflite", "none")
    assert e.value.status == "unsupported"
    convert.refuse_oversized(big, "tflite", "fp16")  # ~1.1 GiB: fits
    convert.refuse_oversized(big, "onnx", "none")  # ONNX keeps it as external data
    huge = factory.artifact("/ws/models/huge.onnx", "onnx", size_bytes=9 * GIB)
    with pytest.raises(StageFailed, match="at --quantize int8: run it as ONNX"):
        convert.refuse_oversized(huge, "tflite", "int8")
    convert.refuse_oversized(factory.artifact(size_bytes=0), "tflite", "none")  # size unknown: the converter says


def test_onnx_quantization_of_a_large_model_keeps_its_weights_as_external_data_in_the_call_and_its_recipe():
    big = factory.artifact("/ws/models/big.onnx", "onnx", size_bytes=int(1.5 * GIB))
    small = factory.artifact("/ws/models/small.onnx", "onnx", size_bytes=10_000)
    assert onnx_quant._external(big) == ({"save_as_external_data": True, "all_tensors_to_one_file": True},
                                         {"use_external_data_format": True})
    assert onnx_quant._external(small) == ({}, {})
    for quantize in ("dynamic", "int8"):
        code = onnx_quant.recipe(big, quantize).code
        assert "quant_pre_process(SOURCE, 'pre.onnx', save_as_external_data=True, all_tensors_to_one_file=True)" in code
        assert "use_external_data_format=True)" in code
        assert "save_as_external_data" not in (plain := onnx_quant.recipe(small, quantize).code)
        assert "use_external_data_format" not in plain


def test_the_tf2onnx_reproducer_keeps_its_savedmodel_and_checks_what_the_conversion_checks():
    """The bundle's recipe of a Keras -> ONNX conversion: the loaded SavedModel is kept (its signature's variables die
    with it: 'a function referencing variables which have been deleted'), the written model goes through the ONNX
    checker (ops tf2onnx left behind) and its inputs are compared with the source's (constants left as inputs)."""
    from deploytool.convert import onnx_tf

    code = onnx_tf.recipe(factory.artifact("/ws/models/m.keras", "keras"), "none").code
    assert "loaded = tf.saved_model.load(saved)" in code and "serving = loaded.signatures['serving_default']" in code
    assert code.index("from_function(") < code.index("onnx.checker.check_model(OUT)") < code.index("raise WrongConversion")
    compile(code, "recipe", "exec")  # the body is valid Python


def test_a_runs_stored_outputs_are_counted_from_the_signature():
    """GPT-2's next-token logits at 128 positions (50,257 a position) are 412 MB a row at 16 samples; a zoo image
    classifier's (its implied signature) are its classes; a dimension the model leaves open counts as 1 (the
    estimate says 'about')."""
    from deploytool.artifact import implied_signature
    from deploytool.migrate import stored_outputs_bytes
    from deploytool.modelfiles.signature import Signature, TensorSpec

    gpt2 = Signature((TensorSpec("input_ids", "int64", (None, 128), "tokens"),),
                     (TensorSpec("logits", "float32", (None, 128, 50257)),))
    need, how = stored_outputs_bytes(gpt2, 16, 1)
    assert need == 16 * 128 * 50257 * 4 == 411_705_344 and how == "1 row(s) x 16 samples x 6,432,896 float32 values a sample"
    assert stored_outputs_bytes(implied_signature((28, 28, 1), 10), 1000, 20, 2) == (22 * 1000 * 10 * 4, "20 row(s) and 2 baseline(s) x 1000 "
                                                           "samples x 10 float32 values a sample")
    open_length = Signature((TensorSpec("x", "float32", (None, None, 4)),),
                            (TensorSpec("a", "float32", (None, None, 3)), TensorSpec("b", "int64", (None,))))
    assert stored_outputs_bytes(open_length, 5, 2)[0] == 2 * 5 * (3 + 1) * 4
