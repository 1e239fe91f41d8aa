"""Tiny models that are not single-input image classifiers, built in code for issue 24's tests, each with a
test set of its own: an ONNX text classifier over token ids and a mask (two int64 inputs), a Keras regression
MLP on tabular features (float labels), a Keras LSTM over sequences, a Keras model with two outputs (class
scores and a value), and a PyTorch model with two inputs exported to `.pt2`. Weights are seeded; nothing is
trained beyond what makes the outputs non-trivial."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SEQ, VOCAB, EMBED, CLASSES = 12, 40, 8, 3
FEATURES = 16
STEPS, STEP_FEATURES = 10, 6


def onnx_text_classifier(path: Path, seq: int | None = SEQ) -> Path:
    """`input_ids` and `attention_mask` (int64, [N, seq]) -> `logits` [N, 3]: a masked mean of token embeddings,
    then a dense layer. `seq=None` leaves the sequence length open, as exported transformers do."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(VOCAB, EMBED)).astype(np.float32), "embedding"),
             numpy_helper.from_array(rng.normal(size=(EMBED, CLASSES)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(size=(CLASSES,)).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([2], np.int64), "axis2"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps")]
    nodes = [
        helper.make_node("Gather", ["embedding", "input_ids"], ["emb"]),  # [N, seq, E]
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),  # [N, E]
        helper.make_node("ReduceSum", ["maskf", "axis1"], ["count"], keepdims=1),  # [N, 1]
        helper.make_node("Add", ["count", "eps"], ["count_eps"]),
        helper.make_node("Div", ["summed", "count_eps"], ["mean"]),
        helper.make_node("MatMul", ["mean", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "text_classifier",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [None, seq]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [None, seq])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def text_data(path: Path, n: int = 64, labelled: bool = True) -> Path:
    """Token ids (padding 0 after a random length) and the matching mask; labels 0..2 when `labelled`."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(3, SEQ + 1, n)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int64)
    ids = rng.integers(1, VOCAB, (n, SEQ)).astype(np.int64) * mask
    arrays = {"input_ids": ids, "attention_mask": mask}
    if labelled:
        arrays["y"] = rng.integers(0, CLASSES, n).astype(np.int64)
    np.savez(path, **arrays)
    return path


def _keras():
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    import keras

    keras.utils.set_random_seed(0)
    return keras


def tabular_data(n: int = 200, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Features and a float target that depends on them (with a little noise)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    w = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)
    y = (x @ w + 0.5 * np.sin(x[:, 0]) + 0.05 * rng.normal(size=n)).astype(np.float32)
    return x, y


def keras_regression_mlp(path: Path, epochs: int = 20) -> Path:
    """16 float features -> one float (a house price, a sensor reading), fitted briefly on `tabular_data`."""
    keras = _keras()
    x, y = tabular_data(400, seed=3)
    model = keras.Sequential([keras.Input((FEATURES,), name="features"), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(1, name="value")])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0)
    model.save(path)
    return path


def keras_lstm(path: Path) -> Path:
    """A sequence (N, 10 steps, 6 features) -> 4 class scores through an LSTM of 8 units."""
    keras = _keras()
    model = keras.Sequential([keras.Input((STEPS, STEP_FEATURES), name="sequence"), keras.layers.LSTM(8),
                              keras.layers.Dense(4, name="scores")])
    model.save(path)
    return path


def sequence_data(path: Path, n: int = 48) -> Path:
    rng = np.random.default_rng(4)
    np.savez(path, x=rng.normal(size=(n, STEPS, STEP_FEATURES)).astype(np.float32),
             y=rng.integers(0, 4, n).astype(np.int64))
    return path


def keras_two_outputs(path: Path) -> Path:
    """Features -> `scores` (5 classes) and `value` (one float): two heads on one trunk."""
    keras = _keras()
    inp = keras.Input((FEATURES,), name="features")
    trunk = keras.layers.Dense(16, activation="tanh")(inp)
    model = keras.Model(inp, [keras.layers.Dense(5, name="scores")(trunk), keras.layers.Dense(1, name="value")(trunk)])
    model.save(path)
    return path


def torch_two_inputs(path: Path) -> Path:
    """`image` (N, 1, 8, 8) float and `extra` (N, 4) float -> 3 scores, exported with torch.export."""
    import torch

    torch.manual_seed(0)

    class TwoInputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, 3)
            self.fc = torch.nn.Linear(2 * 6 * 6 + 4, 3)

        def forward(self, image: torch.Tensor, extra: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.cat([self.conv(image).flatten(1), extra], dim=1))

    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(TwoInputs().eval(), (torch.zeros(2, 1, 8, 8), torch.zeros(2, 4)),
                                  dynamic_shapes={"image": {0: batch}, "extra": {0: batch}})
    torch.export.save(program, str(path))
    return path
