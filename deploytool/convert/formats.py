"""The built-in words of conversion: the source formats, the format words a user types (--format, in the
order they are listed and expanded) and the quantization words (--quantize, likewise), each with the reason a
user reads where no converter goes. The converters register their own routes (register_converter)."""

from __future__ import annotations

from deploytool.convert.registry import QUANTIZE_WORDS, Format, SourceFormat, register_format, register_source_format

for _source in (
    SourceFormat("keras"),
    SourceFormat("saved_model"),
    SourceFormat("torch"),
    SourceFormat("onnx"),
    SourceFormat("tflite", no_route="a .tflite model is already converted; only --format tflite --quantize none "
                                    "applies"),
):
    register_source_format(_source)

for _format in (
    Format("tflite", "tflite"),
    Format("tfjs", "tfjs_graph",
           refused={"torch": "no converter here goes from PyTorch to TF.js; use tflite, tflite-onnx2tf or onnx"}),
    Format("onnx", "onnx"),
    # no source here reaches it: the reason is checked before any route
    Format("tfjs-layers", "tfjs_layers",
           unreachable="TF.js layers models come only from tf.keras (Keras 2) models; the zoo and .keras files are "
                       "Keras 3, whose layers-model output TF.js 4.22 cannot load (it rejects `batch_shape`); "
                       "use --format tfjs (a graph model)"),
    # TFLite made by a second converter (onnx2tf, through ONNX), so that two converters of one source can be run
    # side by side; for an ONNX model plain "tflite" is already onnx2tf's.
    Format("tflite-onnx2tf", "tflite", help="TFLite by onnx2tf through ONNX, for PyTorch models", refused={
        "keras": "tflite-onnx2tf is the second TFLite converter for PyTorch models; for Keras use tflite",
        "saved_model": "tflite-onnx2tf is the second TFLite converter for PyTorch models; for a SavedModel use tflite",
        "onnx": "for an ONNX model --format tflite is already made by onnx2tf; use tflite",
    }),
):
    register_format(_format)

for _word, _meaning in (
    ("none", "float32, no quantization"),
    ("fp16", "float16 weights"),
    ("dynamic", "dynamic-range int8 weights"),
    ("int8", "full integer int8, calibrated on the training split"),
    ("int8-io", "full integer int8 with int8 input/output tensors"),
    ("uint8", "uint8 weight quantization"),
    ("uint16", "uint16 weight quantization"),
):
    QUANTIZE_WORDS.add(_word, _meaning)
