"""Keras / SavedModel -> ONNX (opset 17) with tf2onnx, from the SavedModel's
serving function (`tf2onnx.convert.from_keras` does not work on Keras 3).
The input keeps the source's NHWC layout and a free batch dimension. Only
fp32 is made here; ONNX quantization is `onnx_quant`'s job. Never runs the
model it made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, Recipe, check_onnx, dist_version, finish, saved_model_recipe
from deploytool.convert._tf import saved_model_dir, serving_function
from deploytool.convert.registry import Route, register_converter
from deploytool.modelfiles.signature import match_names, serving_signature

CONVERTER = "tf2onnx"
DIST = "tf2onnx"
OPSET = 17

MODES = {"none": Mode("float32, no quantization")}
# Which quantization words ONNX lacks, and why, is onnx_quant.UNSUPPORTED: one list for every ONNX exporter.


def recipe(source: Artifact, quantize: str) -> Recipe:
    """tf2onnx.convert.from_function over the serving signature, every input at its dtype with a free batch."""
    code = ("import tensorflow as tf\nimport tf2onnx\n" + saved_model_recipe(source) +
            "serving = tf.saved_model.load(saved).signatures['serving_default']\n"
            "inputs = serving.structured_input_signature[1]\n"
            "spec = tuple(tf.TensorSpec((None, *s.shape[1:]), s.dtype, name=n) for n, s in inputs.items())\n"
            "@tf.function(input_signature=spec)\n"
            "def serve(*x):\n"
            "    return serving(**dict(zip(inputs, x)))\n"
            f"tf2onnx.convert.from_function(serve, input_signature=spec, opset={OPSET}, output_path=OUT)\n")
    return Recipe(code, ("tensorflow", "tf2onnx", "onnx") + (("keras",) if source.format == "keras" else ()),
                  "model.onnx")


@register_converter("onnx_tf", converter=CONVERTER, dist=DIST, modes=MODES,
                    routes=(Route("keras", "onnx", then="onnx_quant"), Route("saved_model", "onnx", then="onnx_quant")), owner="onnx/tensorflow-onnx",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: np.ndarray | None) -> Artifact:
    import tensorflow as tf
    import tf2onnx

    path = Path(out_dir) / "model.onnx"
    if source.signature is not None:
        return _convert_named(source, quantize, path)
    spec = (tf.TensorSpec((None, *source.input_shape), tf.float32, name="input"),)
    with tempfile.TemporaryDirectory(prefix="deploytool-onnx-") as tmp:
        loaded, in_name, out_name, sig = serving_function(saved_model_dir(source, Path(tmp)))

        @tf.function(input_signature=spec)
        def serve(x: Any) -> Any:
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


def _convert_named(source: Artifact, quantize: str, path: Path) -> Artifact:
    """A model with a signature: every input by its own name and dtype (open dimensions stay open), every
    output by the source's name."""
    import tensorflow as tf
    import tf2onnx

    sig = source.signature
    assert sig is not None
    spec = tuple(tf.TensorSpec((None, *t.sample_shape), tf.as_dtype(t.dtype), name=t.name) for t in sig.inputs)
    with tempfile.TemporaryDirectory(prefix="deploytool-onnx-") as tmp:
        loaded = tf.saved_model.load(str(saved_model_dir(source, Path(tmp))))
        serving = serving_signature(loaded, str(source.path))
        feeds = match_names(sig.input_names, list(serving.structured_input_signature[1]))
        fetches = match_names(sig.output_names, list(serving.structured_outputs))

        @tf.function(input_signature=spec)
        def serve(*x: Any) -> Any:
            out = serving(**{feeds[t.name]: v for t, v in zip(sig.inputs, x)})
            return {name: out[fetches[name]] for name in sig.output_names}

        model_proto, _ = tf2onnx.convert.from_function(serve, input_signature=spec, opset=OPSET,
                                                       output_path=str(path))
        del loaded
    check_onnx(model_proto)
    return finish(source, path, "onnx", quantize, CONVERTER, dist_version(DIST),
                  {"opset": OPSET, "from": "saved_model serving_default", "input_names": list(sig.input_names),
                   "output_names": list(sig.output_names)})

