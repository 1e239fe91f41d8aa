"""Keras / SavedModel -> TF.js graph model: the Keras model is exported as a
SavedModel (`model.export`), then `tensorflowjs_converter` (run in-process
through its own argument parser, with the same flags as the command line)
writes model.json and weight shards, with optional fp16/uint8/uint16 weight
quantization. TF.js has no integer kernels: the `dynamic` and `int8` words
become uint8 weight quantization and the artifact says so. Never runs the model.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from deploytool.artifact import Artifact
from deploytool.convert._common import Mode, Recipe, dist_version, finish, saved_model_recipe
from deploytool.convert._tf import saved_model_dir
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import Feed

CONVERTER = "tensorflowjs_converter"
DIST = "tensorflowjs"

_INSTEAD = ("TF.js has no int8 kernels: uint8 weight quantization was done instead of {word} (weights are "
            "dequantized to float32 when the model loads; activations stay float32)")

_UINT8 = "uint8 weight quantization (affine, per tensor; dequantized to float32 at load)"

MODES = {
    "none": Mode("float32 weights"),
    "fp16": Mode("float16 weight quantization (dequantized to float32 at load)"),
    "dynamic": Mode(_UINT8, note=_INSTEAD.format(word="dynamic-range int8"), alias=True),
    "int8": Mode(_UINT8, note=_INSTEAD.format(word="full int8"), alias=True),
    "uint8": Mode(_UINT8),
    "uint16": Mode("uint16 weight quantization (affine, per tensor; dequantized to float32 at load)"),
}

UNSUPPORTED = {
    "int8-io": "TF.js models take and return float32 tensors; there is no int8-input variant (use int8 or uint8)",
}

_FLAGS = {"none": [], "fp16": ["--quantize_float16=*"], "dynamic": ["--quantize_uint8=*"],
          "int8": ["--quantize_uint8=*"], "uint8": ["--quantize_uint8=*"], "uint16": ["--quantize_uint16=*"]}


def recipe(source: Artifact, quantize: str) -> Recipe:
    """tensorflowjs_converter on the serving signature with `convert`'s arguments."""
    args = ["--input_format=tf_saved_model", "--output_format=tfjs_graph_model",
            "--signature_name=serving_default", *_FLAGS[quantize]]
    code = ("import os\nos.environ.setdefault('TFDF_DISABLE_WELCOME_MESSAGE', '1')\n"
            "from tensorflowjs.converters import converter\n" + saved_model_recipe(source) +
            f"converter.convert([*{args!r}, saved, OUT])\n")
    return Recipe(code, ("tensorflowjs", "tensorflow") + (("keras",) if source.format == "keras" else ()), "tfjs")


@register_converter("tfjs", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("keras", "tfjs"), Route("saved_model", "tfjs")), owner="tensorflow/tfjs",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    # tensorflowjs imports TF-DF, whose welcome banner imports IPython (not installed) whenever
    # sys.stdout is not the real terminal/pipe (pytest capture, a progress bar's wrapper).
    os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    from tensorflowjs.converters import converter

    out = Path(out_dir) / "tfjs"
    args = ["--input_format=tf_saved_model", "--output_format=tfjs_graph_model",
            "--signature_name=serving_default", *_FLAGS[quantize]]
    with tempfile.TemporaryDirectory(prefix="deploytool-tfjs-") as tmp:
        converter.convert([*args, str(saved_model_dir(source, Path(tmp))), str(out)])
    model_json = json.loads((out / "model.json").read_text())
    if model_json.get("format") != "graph-model":
        raise ValueError(f"tensorflowjs_converter wrote a {model_json.get('format')!r} model, not a graph model")
    return finish(source, out, "tfjs_graph", quantize, CONVERTER, dist_version(DIST),
                  {"args": args, "output_format": "tfjs_graph_model"})
