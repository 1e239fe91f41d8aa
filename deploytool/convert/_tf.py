"""The TensorFlow side shared by the Keras/SavedModel converters: one SavedModel
serving signature to convert from, whatever the source was. TensorFlow and
Keras are imported inside the functions; nothing here writes into the
caller's output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deploytool.modelfiles.signature import serving_signature
from deploytool.artifact import Artifact


def load_keras(path: Path) -> Any:
    import keras

    # safe_mode (the default) refuses to deserialize arbitrary Python code (Lambda layers).
    return keras.saving.load_model(str(path), compile=False, safe_mode=True)


def saved_model_dir(source: Artifact, tmp: Path) -> Path:
    """A SavedModel with a `serving_default` signature for `source` (exported into `tmp` for Keras)."""
    if source.format == "saved_model":
        return Path(source.path)
    out = Path(tmp) / "saved_model"
    load_keras(source.path).export(str(out), format="tf_saved_model", verbose=False)
    return out


def serving_function(saved_model: Path) -> Any:
    """(loaded object, input name, output name, concrete function) of a SavedModel's one-input,
    one-output serving signature. Keep the loaded object alive while using the function:
    it owns the variables."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model))
    sig = serving_signature(loaded, str(saved_model))
    inputs = sig.structured_input_signature[1]
    if len(inputs) != 1:
        raise ValueError(f"the serving signature has {len(inputs)} inputs; deploytool handles one-input models")
    output_names = sorted(sig.structured_outputs)
    if len(output_names) != 1:
        raise ValueError(f"the serving signature has {len(output_names)} outputs; deploytool handles "
                         "one-output models")
    return loaded, next(iter(inputs)), output_names[0], sig


def unrolled_saved_model(source: Artifact, tmp: Path) -> Path | None:
    """A SavedModel of the Keras `source` with every recurrent layer unrolled over its steps (same weights), or
    None when it has none that can be (not a .keras file, no recurrent layer, or a free number of steps)."""
    import keras

    if source.format != "keras":
        return None
    model = load_keras(source.path)
    kinds = (keras.layers.LSTM, keras.layers.GRU, keras.layers.SimpleRNN)
    if not any(isinstance(layer, kinds) for layer in model.layers) or any(
            d is None for i in model.inputs for d in list(i.shape)[1:]):
        return None

    def clone(layer: keras.layers.Layer) -> keras.layers.Layer:
        config = layer.get_config()
        if isinstance(layer, kinds):
            config["unroll"] = True
        return layer.__class__.from_config(config)

    unrolled = keras.models.clone_model(model, clone_function=clone)
    unrolled.set_weights(model.get_weights())
    out = Path(tmp) / "saved_model_unrolled"
    unrolled.export(str(out), format="tf_saved_model", verbose=False)
    return out

