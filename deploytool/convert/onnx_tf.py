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

from deploytool.artifact import Artifact
from deploytool.errors import WrongConversion
from deploytool.convert._common import (Mode, Recipe, check_onnx, dist_version, fallback, fallback_note, finish,
                                        onnx_input_names, saved_model_recipe)
from deploytool.convert._tf import saved_model_dir
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import Feed
from deploytool.modelfiles.signature import match_names, serving_signature

CONVERTER = "tf2onnx"
DIST = "tf2onnx"
OPSET = 17

MODES = {"none": Mode("float32, no quantization")}
# Which quantization words ONNX lacks, and why, is onnx_quant.UNSUPPORTED: one list for every ONNX exporter.


def recipe(source: Artifact, quantize: str) -> Recipe:
    """tf2onnx.convert.from_function over the serving signature, every input at its dtype with a free batch."""
    code = ("import tensorflow as tf\nimport tf2onnx\n" + saved_model_recipe(source) +
            "loaded = tf.saved_model.load(saved)  # kept: its signature's variables live as long as it\n"
            "serving = loaded.signatures['serving_default']\n"
            "inputs = serving.structured_input_signature[1]\n"
            "spec = tuple(tf.TensorSpec((None, *s.shape[1:]), s.dtype, name=n) for n, s in inputs.items())\n"
            "@tf.function(input_signature=spec)\n"
            "def serve(*x):\n"
            "    return serving(**dict(zip(inputs, x)))\n"
            f"tf2onnx.convert.from_function(serve, input_signature=spec, opset={OPSET}, output_path=OUT)\n"
            "import onnx\n"
            "onnx.checker.check_model(OUT)  # ops tf2onnx left unconverted (deploytool's check_onnx)\n"
            "graph = onnx.load(OUT).graph\n"
            "initializers = {t.name for t in graph.initializer}\n"
            "extra = [i.name for i in graph.input if i.name not in initializers][len(spec):]\n"
            "class WrongConversion(Exception):\n"
            "    pass\n"
            "if extra:  # the ONNX model asks for inputs its source does not have\n"
            "    raise WrongConversion(f'the ONNX model has {len(extra)} input(s) its source does not have: {extra}')\n")
    return Recipe(code, ("tensorflow", "tf2onnx", "onnx") + (("keras",) if source.format == "keras" else ()),
                  "model.onnx")


@register_converter("onnx_tf", converter=CONVERTER, dist=DIST, modes=MODES,
                    routes=(Route("keras", "onnx", then="onnx_quant"), Route("saved_model", "onnx", then="onnx_quant")), owner="onnx/tensorflow-onnx",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    """Every input by its own name and dtype (open dimensions stay open), every output by the source's name."""
    import tensorflow as tf

    path = Path(out_dir) / "model.onnx"
    sig = source.signature
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

        model_proto, options = _from_function(serve, spec, path)
        del loaded
    check_onnx(model_proto)
    return finish(source, path, "onnx", quantize, CONVERTER, dist_version(DIST),
                  {"opset": OPSET, "from": "saved_model serving_default", "input_names": list(sig.input_names),
                   "output_names": list(sig.output_names), **options}, _notes(options))


def _from_function(serve: Any, spec: tuple[Any, ...], path: Path) -> tuple[Any, dict[str, Any]]:
    """tf2onnx.convert.from_function, checked: the model it writes must ask for the source's inputs alone. It
    leaves a constant the serving function captured (a Keras Normalization layer's mean and variance) as a graph
    input the source does not have; then the function is frozen first (every capture made a constant,
    convert_variables_to_constants_v2) and converted as a GraphDef, TensorFlow's documented way to a graph of
    constants, and the first call's fault is recorded (a finding of its own, its bundle reproducing it)."""
    import tf2onnx

    model_proto, _ = tf2onnx.convert.from_function(serve, input_signature=spec, opset=OPSET, output_path=str(path))
    extra = onnx_input_names(path)[len(spec):]
    if not extra:
        return model_proto, {}
    try:
        raise WrongConversion(f"tf2onnx.convert.from_function left {len(extra)} constant(s) the model captured as "
                              f"graph inputs its source does not have ({', '.join(extra[:4])})")
    except WrongConversion as e:
        first = e
    model_proto = _from_frozen_graph(serve, path)
    if onnx_input_names(path)[len(spec):]:
        raise first  # the alternative leaves them too: the row fails with the first fault
    return model_proto, {"fallback": fallback("onnx_tf", "tf2onnx.convert.from_function(serve, ...)", first,
                                              "convert_variables_to_constants_v2(serve) + "
                                              "tf2onnx.convert.from_graph_def")}


def _from_frozen_graph(serve: Any, path: Path) -> Any:
    import tensorflow as tf
    import tf2onnx
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    frozen = convert_variables_to_constants_v2(serve.get_concrete_function())
    inputs = [t.name for t in frozen.inputs if t.dtype != tf.resource]
    outputs = [t.name for t in frozen.outputs]
    model_proto, _ = tf2onnx.convert.from_graph_def(frozen.graph.as_graph_def(), input_names=inputs,
                                                    output_names=outputs, opset=OPSET, output_path=str(path))
    return model_proto


def _notes(options: dict[str, Any]) -> tuple[str, ...]:
    return (fallback_note(options["fallback"]),) if "fallback" in options else ()

