"""Tiny models for the web-target tests, built with the real converters: a small
Keras CNN on 8x8x1 inputs, exported as a SavedModel and converted to a TF.js
graph model (tensorflowjs), ONNX (tf2onnx) and TFLite (TFLiteConverter, fp32
and full int8 with int8 I/O). The Keras model's own outputs are the baseline.
Deliberately independent of deploytool.convert: these tests check the browser
runtimes, not our converters. Built once and kept between sessions (tests/kept.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from tests.kept import copy_kept

INPUT_SHAPE = (8, 8, 1)
NUM_CLASSES = 10


@dataclass
class WebModels:
    inputs: np.ndarray  # (N, 8, 8, 1) float32
    keras_outputs: np.ndarray  # (N, 10) float32: the baseline
    tfjs: Artifact
    onnx: Artifact
    tflite: Artifact
    tflite_int8: Artifact  # full int8 with int8 input and output


def _artifact(path: Path, fmt: str, converter: str, quantize: str = "none") -> Artifact:
    return Artifact(path=path, format=fmt, framework="keras", layout="NHWC", input_shape=INPUT_SHAPE,
                    num_outputs=NUM_CLASSES, quantize=quantize, converter=converter)


def build(out: Path, n: int = 64, seed: int = 0) -> WebModels:
    """The models in `out`: built once and kept between sessions (tests/kept.py: keyed by this file and the
    versions of the packages that make them), then copied there."""
    arrays = copy_kept(f"web-models-n{n}-seed{seed}", lambda folder: _make(folder, n, seed), out, Path(__file__))
    return WebModels(
        inputs=arrays["inputs"], keras_outputs=arrays["keras_outputs"],
        tfjs=_artifact(out / "tfjs", "tfjs_graph", "tensorflowjs"),
        onnx=_artifact(out / "model.onnx", "onnx", "tf2onnx"),
        tflite=_artifact(out / "model.tflite", "tflite", "tflite"),
        tflite_int8=_artifact(out / "model_int8.tflite", "tflite", "tflite", quantize="int8-io"),
    )


def _make(out: Path, n: int, seed: int) -> None:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input(INPUT_SHAPE),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(NUM_CLASSES, activation="softmax"),
    ])
    # Noisy copies of 10 random templates, and a few seconds of training: the
    # model is then confident, so top-1 agreement is a real check and not a
    # coin toss between near-equal probabilities.
    rng = np.random.default_rng(seed)
    templates = rng.random((NUM_CLASSES, *INPUT_SHAPE), dtype=np.float32)

    def sample(count: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, NUM_CLASSES, count)
        noise = rng.random((count, *INPUT_SHAPE), dtype=np.float32)
        return (0.6 * templates[labels] + 0.4 * noise).astype(np.float32), labels

    x_train, y_train = sample(1000)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    model.fit(x_train, y_train, epochs=15, batch_size=100, verbose=0)
    x, _ = sample(n)
    y = model.predict(x, verbose=0).astype(np.float32)

    saved = out / "saved_model"
    model.export(str(saved), verbose=False)

    # tensorflowjs imports TF-DF, whose welcome banner imports IPython when
    # stdout is not a terminal (as under pytest): IPython is not installed.
    os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    from tensorflowjs.converters import convert_tf_saved_model

    tfjs_dir = out / "tfjs"
    convert_tf_saved_model(str(saved), str(tfjs_dir))

    import tf2onnx

    spec = (tf.TensorSpec((None, *INPUT_SHAPE), tf.float32, name="input"),)

    @tf.function(input_signature=spec)
    def serve(t):
        return model(t)

    onnx_path = out / "model.onnx"
    tf2onnx.convert.from_function(serve, input_signature=spec, opset=17, output_path=str(onnx_path))

    tflite_path = out / "model.tflite"
    tflite_path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([x[i : i + 1]] for i in range(len(x)))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    int8_path = out / "model_int8.tflite"
    int8_path.write_bytes(conv.convert())
    np.savez(out / "arrays.npz", inputs=x, keras_outputs=y)


def litert_outputs(artifact: Artifact, x: np.ndarray) -> np.ndarray:
    """The same TFLite model on the host's LiteRT, with the same I/O quantization."""
    from ai_edge_litert.interpreter import Interpreter

    from deploytool.modelfiles.tflite_io import read_io

    ins, outs = read_io(str(artifact.path))
    it = Interpreter(model_path=str(artifact.path))
    it.allocate_tensors()
    i_idx = it.get_input_details()[0]["index"]
    o_idx = it.get_output_details()[0]["index"]
    rows = []
    for i in range(len(x)):
        it.set_tensor(i_idx, ins[0].quantize(x[i : i + 1]))
        it.invoke()
        rows.append(outs[0].dequantize(it.get_tensor(o_idx)).reshape(-1))
    return np.stack(rows)


@dataclass
class TorchOnnx:
    inputs: np.ndarray  # (N, 1, 8, 8) float32, NCHW
    torch_outputs: np.ndarray  # (N, 10): the baseline
    onnx: Artifact  # NCHW, batch fixed at 1 as torch.onnx.export leaves it


def build_torch_onnx(out: Path, inputs_nhwc: np.ndarray, seed: int = 0) -> TorchOnnx:
    """A tiny PyTorch CNN exported with torch.onnx.export: NCHW, fixed batch 1."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(4 * 3 * 3, NUM_CLASSES),
    ).eval()
    x = np.ascontiguousarray(inputs_nhwc.transpose(0, 3, 1, 2))
    with torch.no_grad():
        y = model(torch.from_numpy(x)).numpy().astype(np.float32)
    path = out / "torch_model.onnx"
    torch.onnx.export(model, (torch.from_numpy(x[:1]),), str(path), input_names=["input"],
                      output_names=["logits"], dynamo=True, verbose=False)
    art = Artifact(path=path, format="onnx", framework="torch", layout="NCHW", input_shape=(1, 8, 8),
                   num_outputs=NUM_CLASSES, converter="torch.onnx")
    return TorchOnnx(inputs=x, torch_outputs=y, onnx=art)
