"""ONNX -> TFLite with onnx2tf (a second TFLite converter beside the
TensorFlow and litert-torch ones): fp32, fp16 weights, dynamic-range int8,
and full int8 calibrated on the training split with float or int8
input/output tensors. onnx2tf rebuilds the graph in TensorFlow and hands it
to the TFLite converter; the input keeps the ONNX model's layout and a free
batch dimension. Never runs the model it made beyond the calibration pass.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert import tflite_tf
from deploytool.convert import _onnx2tf
from deploytool.convert._common import Mode, calibration_subset, dist_version, finish

CONVERTER = _onnx2tf.CONVERTER
DIST = _onnx2tf.DIST

MODES = {
    "none": Mode("float32, no quantization"),
    "fp16": Mode("float16 weights (CPU kernels compute in float32)"),
    "dynamic": Mode("dynamic-range quantization: int8 weights, float32 input/output, activations "
                    "quantized at run time"),
    "int8": Mode("full integer int8 (per-channel weights, activations calibrated on the training split), "
                 "float32 input/output"),
    "int8-io": Mode("full integer int8 (per-channel weights, activations calibrated on the training split) "
                    "with int8 input/output tensors"),
}

UNSUPPORTED = tflite_tf.UNSUPPORTED  # the same words: uint8/uint16 are TF.js modes whichever converter makes the TFLite


def convert(source: Artifact, quantize: str, out_dir: Path, calibration: np.ndarray | None) -> Artifact:
    integer = quantize in ("int8", "int8-io")
    samples = calibration_subset(calibration, f"onnx2tf {quantize}") if integer else None
    with tempfile.TemporaryDirectory(prefix="deploytool-onnx2tf-") as tmp:
        options = _onnx2tf.run(source, Path(tmp), samples, integer=integer, dynamic=quantize == "dynamic")
        made = _onnx2tf.tflite_path(source, Path(tmp), quantize)
        path = Path(out_dir) / "model.tflite"
        shutil.copyfile(made, path)
    options["file"] = made.name.replace(Path(source.path).stem, "model", 1)
    if quantize == "int8-io":
        options.update(inference_input_type="int8", inference_output_type="int8")
    return finish(source, path, "tflite", quantize, CONVERTER, dist_version(DIST), options)
