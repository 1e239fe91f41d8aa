"""ONNX -> TF.js graph model: onnx2tf writes a SavedModel, which
`tensorflowjs_converter` (the `tfjs` module, with its modes and flags)
turns into model.json and weight shards. The input keeps the ONNX model's
layout. Never runs the model it made.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from deploytool.artifact import Artifact
from deploytool.convert import _onnx2tf, tfjs
from deploytool.convert._common import Recipe, dist_version
from deploytool.convert.registry import Route, register_converter
from deploytool.data.feed import CHANNELS_LAST_OUTPUTS, Feed
from deploytool.modelfiles.signature import serving_signature

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


def _serving_output_shapes(saved_model: Path) -> dict[str, tuple[int | None, ...]]:
    """Each output of a SavedModel's serving signature, one sample's shape."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model))
    outs = serving_signature(loaded, str(saved_model)).structured_outputs
    return {n: tuple(None if d is None else int(d) for d in list(s.shape)[1:]) for n, s in outs.items()}


@register_converter("tfjs_onnx2tf", converter=CONVERTER, dist=DIST, modes=MODES, unsupported=UNSUPPORTED,
                    routes=(Route("onnx", "tfjs"),), owner="PINTO0309/onnx2tf",
                    recipe=recipe)
def convert(source: Artifact, quantize: str, out_dir: Path, calibration: Feed | None) -> Artifact:
    with tempfile.TemporaryDirectory(prefix="deploytool-onnx2tf-") as tmp:
        options = _onnx2tf.run(source, Path(tmp))
        shapes = _serving_output_shapes(Path(tmp))
        moved = _onnx2tf.channels_last_names(source, shapes)
        saved = replace(source, path=Path(tmp), format="saved_model")
        art = tfjs.convert(saved, quantize, out_dir, calibration)
    if moved:
        art = replace(art, options={**art.options, CHANNELS_LAST_OUTPUTS: moved})
    art = replace(art, notes=(*art.notes, *_onnx2tf.layout_notes(source, shapes)))
    return replace(art, converter=f"{CONVERTER} + {art.converter}",
                   converter_version=f"{dist_version(DIST)} + {art.converter_version}",
                   source_sha256=source.sha256, options={**art.options, "saved_model_by": {"converter": CONVERTER,
                                                                                           **options}})
