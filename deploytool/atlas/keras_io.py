"""The Keras side of an atlas build (runs in the build worker only): the final layer centred and scaled so the
outputs vary across samples, the outputs on the test set, the parameter count, and the `.keras` file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deploytool.atlas.inputs import MIN_RELATIVE_SPREAD, rescale_for_spread


def seed(value: int) -> None:
    """Seed Keras's (and TensorFlow's, NumPy's, Python's) random initialisers."""
    import keras

    keras.utils.set_random_seed(value)


def _final_layer(model: Any) -> Any:
    """The last layer with a kernel mapping features to outputs: a Dense, or a 1x1 Conv2D (MobileNetV3's logits)."""
    for layer in reversed(model.layers):
        kernel = getattr(layer, "kernel", None)
        if kernel is not None and (len(kernel.shape) == 2 or tuple(kernel.shape[:2]) == (1, 1)):
            return layer
    return None


def rescale_final_layer(model: Any, test: dict[str, np.ndarray]) -> str:
    """Centre and scale the final layer's pre-activation outputs on the test set; returns what was done."""
    import keras

    layer = _final_layer(model)
    if layer is None or getattr(layer, "bias", None) is None:
        return ""
    features = keras.Model(model.inputs, layer.input).predict(_feed(test), verbose=0, batch_size=16)
    kernel, bias = (np.asarray(w) for w in layer.get_weights()[:2])
    w2d = kernel.reshape(-1, kernel.shape[-1])
    logits = features.reshape(-1, w2d.shape[0]) @ w2d + bias
    k, shift = rescale_for_spread(logits)
    relative = float(np.mean(np.std(logits, axis=0))) / (float(np.mean(np.abs(logits))) + 1e-30)
    if relative < MIN_RELATIVE_SPREAD:
        return f"not rescaled: the logits vary by {relative:.1e} of their size (float rounding)"
    layer.set_weights([kernel * k, (bias - shift) * k, *layer.get_weights()[2:]])
    return f"{layer.name}: centred and scaled x{k:.3g}"


def calibrate_batch_norm(model: Any, data: dict[str, np.ndarray]) -> int:
    """Every BatchNormalization's moving mean and variance set to its batch statistics on `data`, as a trained
    model's are on its data; returns how many layers. With the initial statistics (mean 0, variance 1) a deep random
    network's activations shrink layer after layer (MobileNetV3Small's logits: ~1e-10), and every route agrees on
    outputs that are all the same. One training-mode call with momentum 0 sets each layer's statistics on the
    inputs it sees at inference (the layers before it already normalised)."""
    import keras

    layers = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
    for layer in layers:
        layer.momentum = 0.0
    model(_feed(data), training=True)
    return len(layers)


def _feed(test: dict[str, np.ndarray]) -> Any:
    return test["x"] if list(test) == ["x"] else test


def predict(model: Any, test: dict[str, np.ndarray]) -> np.ndarray:
    out = model.predict(_feed(test), verbose=0, batch_size=16)
    return np.asarray(out[0] if isinstance(out, (list, tuple)) else out)


def count_params(model: Any) -> int:
    return int(model.count_params())


def save(model: Any, test: dict[str, np.ndarray], path: Path) -> None:
    model.save(path)
