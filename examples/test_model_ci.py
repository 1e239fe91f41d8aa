"""Guard a model in CI with pytest: each test migrates the model as deploytool would for the phone and the browser,
runs the test set there and fails, naming the rows and the report, when one of them leaves its limits.

    pytest examples/test_model_ci.py            # from a checkout, in the deploytool venv

Replace `model_and_data` with your own model and test set: a file path (`"model.keras"`, `"model.onnx"`, a `.pt2`)
or the object itself (a `keras.Model`, a `torch.nn.Module`), and an `.npz` path or arrays (`(x, y)`). Results are
kept in ./runs (or $DEPLOYTOOL_WORKSPACE): a second CI run of an unchanged model and test set measures nothing
again, and the report of a failing row is there to upload as an artifact."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.testing import assert_migrates

LEAN = dict(latency_samples=20, warmup=2)  # enough for CI; leave them out for a full measurement


@pytest.fixture(scope="module")
def model_and_data():
    """A small classifier and its test set; yours would be `keras.saving.load_model(...)` and `np.load(...)`."""
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()  # TensorFlow without its start-up log lines
    import keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 20)).astype(np.float32)
    y = (x[:, :4].argmax(1)).astype(np.int64)  # learnable: which of the first four features is largest
    model = keras.Sequential([keras.Input((20,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)],
                             name="ci_example")
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=20, verbose=0)
    return model, (x[:128], y[:128])


def test_float_onnx_keeps_every_prediction_on_the_host_and_in_the_browser(model_and_data):
    model, data = model_and_data
    assert_migrates(model, data, target=("host", "web"), formats="onnx", quantize="none", min_agreement=1.0, **LEAN)


def test_int8_tflite_stays_within_two_points_of_agreement_and_is_not_slower(model_and_data):
    model, data = model_and_data
    assert_migrates(model, data, target="host", formats="tflite", quantize="int8", min_agreement=0.98,
                    max_latency_ratio=1.0, **LEAN)
