"""Keras / SavedModel -> ONNX (opset 17) with tf2onnx, from the SavedModel's
serving function (`tf2onnx.convert.from_keras` does not work on Keras 3).
The input keeps the source's NHWC layout and a free batch dimension. Only
fp32 is made here; ONNX quantization is `onnx_quant`'s job. Never runs the
model it made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, check_onnx, dist_version, finish
from deploytool.convert._tf import saved_model_dir, serving_function
from deploytool.convert.registry import Route, register_converter

CONVERTER = "tf2onnx"
DIST = "tf2onnx"
OPSET = 17

MODES = {"none": Mode("float32, no quantization")}
# Which quantization words ONNX lacks, and why, is onnx_quant.UNSUPPORTED: one list for every ONNX exporter.


@register_converter("onnx_tf", converter=CONVERTER, dist=DIST, modes=MODES,
                    routes=(Route("keras", "onnx", then="onnx_quant"), Route("saved_model", "onnx", then="onnx_quant")))
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: np.ndarray | None) -> Artifact:
    import tensorflow as tf
    import tf2onnx

    path = Path(out_dir) / "model.onnx"
    spec = (tf.TensorSpec((None, *source.input_shape), tf.float32, name="input"),)
    with tempfile.TemporaryDirectory(prefix="deploytool-onnx-") as tmp:
        loaded, in_name, out_name, sig = serving_function(saved_model_dir(source, Path(tmp)))

        @tf.function(input_signature=spec)
        def serve(x):
            # A dict output names the ONNX output "output" instead of "Identity:0".
            return {"output": sig(**{in_name: x})[out_name]}

        model_proto, _ = tf2onnx.convert.from_function(serve, input_signature=spec, opset=OPSET,
                                                       output_path=str(path))
        del loaded
    # from_function continues past ops it cannot convert, leaving TF ops behind that no
    # ONNX runtime can run: that is a failed conversion, said now rather than at load.
    check_onnx(model_proto)
    return finish(source, path, "onnx", quantize, CONVERTER, dist_version(DIST),
                  {"opset": OPSET, "from": "saved_model serving_default", "input_name": "input",
                   "output_name": "output"})
