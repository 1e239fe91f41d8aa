"""Keras / SavedModel -> TFLite with `tf.lite.TFLiteConverter`: fp32, fp16
weights, dynamic-range int8, and full int8 calibrated on the training split
with float or int8 input/output tensors. It writes one .tflite file into the
directory it is given and never runs the model it made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, calibration_subset, dist_version, finish
from deploytool.convert._tf import saved_model_dir
from deploytool.convert.registry import Route, register_converter

CONVERTER = "tf.lite.TFLiteConverter"
DIST = "tensorflow"

MODES = {
    "none": Mode("float32, no quantization"),
    "fp16": Mode("float16 weights (CPU kernels compute in float32)"),
    "dynamic": Mode("dynamic-range quantization: int8 weights, float32 input/output, activations "
                    "quantized at run time"),
    "int8": Mode("full integer int8 (weights and activations, calibrated on the training split), "
                 "float32 input/output"),
    "int8-io": Mode("full integer int8 (weights and activations, calibrated on the training split) "
                    "with int8 input/output tensors"),
}

UNSUPPORTED = {
    "uint8": "uint8/uint16 weight quantization is a TF.js mode; for TFLite use fp16, dynamic, int8 or int8-io",
    "uint16": "uint8/uint16 weight quantization is a TF.js mode; for TFLite use fp16, dynamic, int8 or int8-io",
}


@register_converter("tflite_tf", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("keras", "tflite"), Route("saved_model", "tflite")))
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: np.ndarray | None) -> Artifact:
    import tensorflow as tf

    options: dict = {"from": "saved_model"}
    with tempfile.TemporaryDirectory(prefix="deploytool-tflite-") as tmp:
        converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir(source, Path(tmp))))
        if quantize != "none":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            options["optimizations"] = ["DEFAULT"]
        if quantize == "fp16":
            converter.target_spec.supported_types = [tf.float16]
            options["supported_types"] = ["float16"]
        if quantize in ("int8", "int8-io"):
            samples = calibration_subset(calibration, f"TFLite {quantize}")

            def representative_dataset():
                for i in range(len(samples)):
                    yield [samples[i : i + 1]]

            converter.representative_dataset = representative_dataset
            # Only integer kernels: a float fallback op would silently make it a hybrid model.
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            options.update(supported_ops=["TFLITE_BUILTINS_INT8"], calibration_samples=len(samples))
        if quantize == "int8-io":
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
            options.update(inference_input_type="int8", inference_output_type="int8")
        flatbuffer = converter.convert()
    path = Path(out_dir) / "model.tflite"
    path.write_bytes(flatbuffer)
    return finish(source, path, "tflite", quantize, CONVERTER, dist_version(DIST), options)
