"""Tiny TFLite models for the Android tests, made with the real
tf.lite.TFLiteConverter from a small Keras classifier trained for a few
seconds on scikit-learn's 8x8 digits, and kept between sessions (tests/kept.py).
Imports TensorFlow: call only from tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.kept import copy_kept


@dataclass
class TinyModels:
    x_test: np.ndarray  # (N, 8, 8, 1) float32 in [0, 1]
    y_test: np.ndarray  # (N,) int labels
    keras_probs: np.ndarray  # the PC baseline's outputs on x_test
    fp32: Path  # resizable batch dimension
    int8: Path  # full int8 with int8 input and output
    fixed_batch: Path  # batch baked into a Reshape: cannot be resized


def build(out_dir: Path, n_test: int = 240) -> TinyModels:
    """The models in `out_dir`: built once and kept between sessions (tests/kept.py: keyed by this file and the
    versions of the packages that make them), then copied there."""
    arrays = copy_kept(f"phone-models-test{n_test}", lambda folder: _make(folder, n_test), out_dir, Path(__file__))
    return TinyModels(arrays["x_test"], arrays["y_test"], arrays["keras_probs"], out_dir / "digits_fp32.tflite",
                      out_dir / "digits_int8.tflite", out_dir / "digits_fixed_batch.tflite")


def _make(out_dir: Path, n_test: int) -> None:
    import tensorflow as tf
    from sklearn.datasets import load_digits

    tf.keras.utils.set_random_seed(0)
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]
    y = digits.target.astype(np.int64)
    x_train, y_train, x_test, y_test = x[:-n_test], y[:-n_test], x[-n_test:], y[-n_test:]

    model = tf.keras.Sequential([
        tf.keras.Input((8, 8, 1)),
        tf.keras.layers.Conv2D(8, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10, activation="softmax"),
    ])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, epochs=8, batch_size=64, verbose=0)
    keras_probs = model.predict(x_test, verbose=0).astype(np.float32)

    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "digits_fp32.tflite"
    fp32.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([x_train[i : i + 1]] for i in range(200))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    int8 = out_dir / "digits_int8.tflite"
    int8.write_bytes(conv.convert())

    # The same classifier behind a Reshape whose target shape is the constant
    # [1, 64]: resizing the input to a batch makes the Reshape fail to prepare.
    w, b = model.layers[0].get_weights()
    w2, b2 = model.layers[2].get_weights()

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 1], tf.float32)])
    def fixed(inp):
        flat = tf.reshape(inp, tf.constant([1, 64]))
        img = tf.reshape(flat, tf.constant([1, 8, 8, 1]))
        h = tf.nn.relu(tf.nn.conv2d(img, w, 1, "VALID") + b)
        h = tf.reshape(h, tf.constant([1, 6 * 6 * 8]))
        return tf.nn.softmax(tf.matmul(h, w2) + b2)

    fixed_batch = out_dir / "digits_fixed_batch.tflite"
    fixed_batch.write_bytes(tf.lite.TFLiteConverter.from_concrete_functions(
        [fixed.get_concrete_function()], fixed).convert())
    np.savez(out_dir / "arrays.npz", x_test=x_test, y_test=y_test, keras_probs=keras_probs)
