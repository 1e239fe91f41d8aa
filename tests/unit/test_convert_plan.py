"""The conversion plan without converting anything: which routes exist, what
each quantization word really does, what `--quantize all` expands to, the
typed errors for unknown words and impossible combinations, and that the
convert package imports no framework.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np
import pytest

from deploytool.data.feed import Feed
from deploytool import convert as C
from deploytool.convert._common import MAX_CALIBRATION_SAMPLES, calibration_subset
from deploytool.errors import DeploytoolError, StageFailed, UnknownOption

EXPECTED_MODES = {
    ("keras", "tflite"): ("none", "fp16", "dynamic", "int8", "int8-io"),
    ("saved_model", "tflite"): ("none", "fp16", "dynamic", "int8", "int8-io"),
    ("keras", "tfjs"): ("none", "fp16", "uint8", "uint16"),
    ("saved_model", "tfjs"): ("none", "fp16", "uint8", "uint16"),
    ("keras", "onnx"): ("none", "dynamic", "int8"),
    ("saved_model", "onnx"): ("none", "dynamic", "int8"),
    ("torch", "onnx"): ("none", "dynamic", "int8"),
    ("torch", "tflite"): ("none", "fp16", "dynamic", "int8"),
    ("torch", "tflite-onnx2tf"): ("none", "fp16", "dynamic", "int8", "int8-io"),
    ("onnx", "onnx"): ("none", "dynamic", "int8"),
    ("onnx", "tflite"): ("none", "fp16", "dynamic", "int8", "int8-io"),
    ("onnx", "tfjs"): ("none", "fp16", "uint8", "uint16"),
    ("tflite", "tflite"): ("none",),
}


@pytest.mark.parametrize("source", C.SOURCE_FORMATS)
@pytest.mark.parametrize("fmt", C.FORMATS)
def test_quantize_modes_matrix(source, fmt):
    assert C.quantize_modes(source, fmt) == EXPECTED_MODES.get((source, fmt), ())


@pytest.mark.parametrize("source", C.SOURCE_FORMATS)
@pytest.mark.parametrize("fmt", C.FORMATS)
@pytest.mark.parametrize("word", C.QUANTIZE_WORDS)
def test_every_word_is_planned_or_refused_as_unsupported(source, fmt, word):
    try:
        p = C.plan(source, fmt, word)
    except StageFailed as e:
        assert e.status == "unsupported" and e.reason
        assert word not in EXPECTED_MODES.get((source, fmt), ())
        return
    assert (p.source_format, p.fmt, p.quantize) == (source, fmt, word)
    assert p.artifact_format == C.artifact_format(fmt) and p.steps and p.mode
    # A word `--quantize all` leaves out is an alias: it must say what it does instead, or be int8-io == int8.
    if word not in C.quantize_modes(source, fmt):
        assert p.note or word == "int8-io"


def test_tfjs_int8_words_say_uint8_weights_were_done_instead():
    for word in ("int8", "dynamic"):
        p = C.plan("keras", "tfjs", word)
        assert p.mode == C.plan("keras", "tfjs", "uint8").mode
        assert p.note is not None and "uint8 weight quantization was done instead" in p.note
    assert C.plan("keras", "tfjs", "uint8").note is None


def test_onnx_quantization_chains_after_the_exporter():
    assert C.plan("keras", "onnx", "int8").steps == ("onnx_tf", "onnx_quant")
    assert C.plan("torch", "onnx", "dynamic").steps == ("onnx_torch", "onnx_quant")
    assert C.plan("torch", "onnx", "none").steps == ("onnx_torch",)
    assert C.plan("onnx", "onnx", "int8").steps == ("onnx_quant",)
    assert C.plan("onnx", "onnx", "none").converter == "passthrough"


def test_onnx2tf_routes_onnx_to_tflite_and_tfjs_and_is_a_second_tflite_converter_for_torch():
    assert C.plan("onnx", "tflite", "int8").steps == ("tflite_onnx2tf",)
    assert C.plan("onnx", "tfjs", "fp16").steps == ("tfjs_onnx2tf",)
    # Through ONNX: the exporter runs at none, onnx2tf does every mode (none included) from its ONNX model.
    assert C.plan("torch", "tflite-onnx2tf", "none").steps == ("onnx_torch", "tflite_onnx2tf")
    assert C.plan("torch", "tflite-onnx2tf", "int8-io").steps == ("onnx_torch", "tflite_onnx2tf")
    assert C.plan("torch", "tflite", "none").steps == ("tflite_torch",)  # litert-torch stays the plain word's
    p = C.plan("torch", "tflite-onnx2tf", "dynamic")
    assert p.artifact_format == "tflite" and p.fmt == "tflite-onnx2tf"
    assert C.plan("onnx", "tfjs", "int8").mode == C.plan("onnx", "tfjs", "uint8").mode  # tfjs's own modes
    with pytest.raises(StageFailed, match="TF.js mode"):
        C.plan("torch", "tflite-onnx2tf", "uint8")


@pytest.mark.parametrize("source,hint", [("keras", "use tflite"), ("onnx", "already made by onnx2tf"),
                                         ("tflite", "already converted")])
def test_tflite_onnx2tf_elsewhere_says_which_word_to_use(source, hint):
    with pytest.raises(StageFailed) as e:
        C.plan(source, "tflite-onnx2tf", "none")
    assert e.value.status == "unsupported" and hint in e.value.reason


def test_torch_int8_tflite_is_the_int8_io_model_and_says_so():
    p = C.plan("torch", "tflite", "int8")
    assert p.mode == C.plan("torch", "tflite", "int8-io").mode
    assert p.note is not None and "int8 input and output" in p.note


@pytest.mark.parametrize("args,bad", [(("keras", "tflite", "int4"), "int4"), (("keras", "coreml", "none"), "coreml"),
                                      (("caffe", "tflite", "none"), "caffe")])
def test_unknown_words_raise_unknown_option_naming_the_choices(args, bad):
    with pytest.raises(UnknownOption) as e:
        C.plan(*args)
    msg = str(e.value)
    assert bad in msg and "\n" not in msg
    assert isinstance(e.value, DeploytoolError)
    if args[2] == "int4":
        assert all(w in msg for w in C.QUANTIZE_WORDS)


def test_quantize_modes_of_an_unknown_format_is_unknown_option():
    with pytest.raises(UnknownOption):
        C.quantize_modes("keras", "coreml")


@pytest.mark.parametrize("args,why", [(("keras", "tfjs", "int8-io"), "float32"),
                                      (("keras", "onnx", "fp16"), "fp16"),
                                      (("torch", "tfjs", "none"), "PyTorch"),
                                      (("tflite", "tflite", "int8"), "already converted"),
                                      (("onnx", "tfjs-layers", "none"), "tf.keras")])
def test_impossible_combinations_are_unsupported_with_a_reason(args, why):
    with pytest.raises(StageFailed) as e:
        C.plan(*args)
    assert e.value.status == "unsupported" and why in e.value.reason


def test_calibration_subset_is_capped_spread_and_float32():
    x = Feed({"input": np.arange(1000, dtype=np.float64).reshape(1000, 1), "ids": np.arange(1000).reshape(1000, 1)})
    sub = calibration_subset(x, "test")
    assert len(sub) == MAX_CALIBRATION_SAMPLES and sub["input"].dtype == np.float32
    assert sub["ids"].dtype == np.int64  # integer inputs (token ids, masks) keep their type
    assert sub["input"][0, 0] == 0 and sub["input"][-1, 0] == 999  # spread over the split, not its head
    assert len(calibration_subset(x[:10], "test")) == 10
    with pytest.raises(StageFailed) as e:
        calibration_subset(None, "ONNX static int8")
    assert e.value.status == "conversion_failed" and "calibration" in e.value.reason


def test_convert_package_imports_no_framework():
    code = ("import sys, deploytool.convert, deploytool.runtimes.litert, deploytool.runtimes.onnxrt; "
            "print(sorted(m for m in ('tensorflow', 'torch', 'onnxruntime', 'onnx', 'keras', 'tf2onnx', "
            "'tensorflowjs', 'litert_torch', 'ai_edge_litert', 'onnx2tf') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_converter_module_registers_its_step_route_and_format_word():
    """tests/fake_converter.py is one module: importing it adds the word "onnx-fake" (an ONNX artifact) and its
    route after tf2onnx to every list and plan; unregistering takes them away again."""
    from tests import fake_converter

    fake_converter.register()  # (again, if an earlier test imported and unregistered it)
    try:
        assert list(C.FORMATS)[-1] == "onnx-fake" and C.artifact_format("onnx-fake") == "onnx"
        p = C.plan("keras", "onnx-fake", "none")
        assert p.steps == ("onnx_tf", "fake_onnx") and p.artifact_format == "onnx" and "test double" in p.mode
        assert C.quantize_modes("keras", "onnx-fake") == ("none", "int8")
        assert C.quantize_modes("torch", "onnx-fake") == ()
        with pytest.raises(StageFailed, match="no converter from torch to onnx-fake"):
            C.plan("torch", "onnx-fake", "none")
        with pytest.raises(StageFailed, match=r"does not exist for keras -> onnx-fake \(available: none, int8\)"):
            C.plan("keras", "onnx-fake", "dynamic")
    finally:
        fake_converter.unregister()
    assert "onnx-fake" not in C.FORMATS and C.modes("keras", "onnx-fake") == {}
    with pytest.raises(UnknownOption, match="unknown format 'onnx-fake'"):
        C.plan("keras", "onnx-fake", "none")


def test_help_lists_the_registered_format_words():
    from deploytool.cli import build_parser
    from tests import fake_converter

    def migrate_help() -> str:
        parser = build_parser(studies=False)
        commands = next(a for a in parser._actions if a.dest == "command")
        assert isinstance(commands, argparse._SubParsersAction)
        return commands.choices["migrate"].format_help()

    fake_converter.register()
    try:
        assert "onnx-fake (a test double" in " ".join(migrate_help().split())
    finally:
        fake_converter.unregister()
    assert "onnx-fake" not in migrate_help()
