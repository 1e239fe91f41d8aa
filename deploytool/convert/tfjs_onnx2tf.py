"""ONNX -> TF.js graph model: onnx2tf writes a SavedModel, which
`tensorflowjs_converter` (the `tfjs` module, with its modes and flags)
turns into model.json and weight shards. The input keeps the ONNX model's
layout. Never runs the model it made.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert import _onnx2tf, tfjs
from deploytool.convert._common import Recipe, dist_version
from deploytool.convert.registry import Route, register_converter

CONVERTER = _onnx2tf.CONVERTER
DIST = _onnx2tf.DIST

MODES = tfjs.MODES
UNSUPPORTED = tfjs.UNSUPPORTED


def recipe(source: Artifact, quantize: str) -> Recipe:
    """onnx2tf.convert as `_onnx2tf.run` calls it, then tensorflowjs_converter on its SavedModel."""
    saved = replace(source, path=Path("onnx2tf"), format="saved_model")
    code = _onnx2tf.run_recipe(source, False) + tfjs.recipe(saved, quantize).code.replace("saved = SOURCE",
                                                                                          "saved = 'onnx2tf'")
    return Recipe(code, ("numpy", *_onnx2tf.RECIPE_IMPORTS, "tensorflowjs"), "tfjs")


@register_converter("tfjs_onnx2tf", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("onnx", "tfjs"),), owner="PINTO0309/onnx2tf",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: np.ndarray | None) -> Artifact:
    with tempfile.TemporaryDirectory(prefix="deploytool-onnx2tf-") as tmp:
        options = _onnx2tf.run(source, Path(tmp))
        saved = replace(source, path=Path(tmp), format="saved_model")
        art = tfjs.convert(saved, quantize, out_dir, calibration)
    return replace(art, converter=f"{CONVERTER} + {art.converter}",
                   converter_version=f"{dist_version(DIST)} + {art.converter_version}",
                   source_sha256=source.sha256, options={**art.options, "saved_model_by": {"converter": CONVERTER,
                                                                                           **options}})
