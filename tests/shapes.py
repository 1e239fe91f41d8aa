"""Models of the shapes people ship, built in code for the "any model, round 2" and "findings a maintainer acts
on" tests, each with a test set of its own: a Keras text CNN over int32 tokens, a Keras functional model whose
outputs are a dict, a PyTorch module whose outputs are a dict (.pt2), a PyTorch transformer encoder exported to
ONNX, a PyTorch 1-D audio net (.pt2, [N, 1, 800]), a scikit-learn forest through skl2onnx (label + probabilities,
with and without ZipMap), a small per-pixel segmenter, a fully int8 .tflite (int8 input and output), a two-input
recurrent SavedModel whose GRU runs as a TensorFlow while loop, and an image model whose only input is named
`image`. Weights are seeded; the classifiers are fitted briefly so that their predictions vary."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TOKENS, VOCAB = 20, 50
AUDIO = 800


def _keras():
    from deploytool.proc.quiet import import_tensorflow

    import_tensorflow()
    import keras

    keras.utils.set_random_seed(0)
    return keras


# -- a Keras text CNN over int32 token ids ----------------------------------------------------------------
def token_data(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """int32 ids, class = which third of the vocabulary the first token falls in (learnable)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, (n, TOKENS)).astype(np.int32)
    return ids, (ids[:, 0] * 3 // VOCAB).astype(np.int64)


def keras_text_cnn(path: Path) -> Path:
    keras = _keras()
    inp = keras.Input((TOKENS,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(VOCAB, 8)(inp)
    x = keras.layers.Conv1D(8, 3, activation="relu")(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    model = keras.Model(inp, keras.layers.Dense(3, name="topic")(x))
    ids, y = token_data(400, seed=5)
    model.compile(optimizer=keras.optimizers.Adam(0.02),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(ids, y, epochs=8, batch_size=32, verbose=0)
    model.save(path)
    return path


# -- named outputs -----------------------------------------------------------------------------------------
FEATURES = 12


def feature_data(n: int = 48, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, FEATURES)).astype(np.float32)


def keras_dict_outputs(path: Path) -> Path:
    """`features` -> {"kind": 4 class scores, "score": one float}: the usual multi-task model."""
    keras = _keras()
    inp = keras.Input((FEATURES,), name="features")
    trunk = keras.layers.Dense(16, activation="tanh")(inp)
    model = keras.Model(inp, {"kind": keras.layers.Dense(4, name="kind")(trunk),
                              "score": keras.layers.Dense(1, name="score")(trunk)})
    model.save(path)
    return path


def keras_normalized(path: Path) -> Path:
    """`features` -> 4 class scores behind a Normalization layer with its mean and variance given (Keras 3 keeps them
    as constants the serving function captures: tf2onnx's from_function leaves them as graph inputs)."""
    keras = _keras()
    inp = keras.Input((FEATURES,), name="features")
    norm = keras.layers.Normalization(axis=-1, mean=[0.5] * FEATURES, variance=[2.0] * FEATURES)(inp)
    keras.Model(inp, keras.layers.Dense(4, name="kind")(norm)).save(path)
    return path


def torch_dict_outputs(path: Path) -> Path:
    """`features` -> {"kind": 4 scores, "score": one float}, exported with torch.export."""
    import torch

    torch.manual_seed(0)

    class Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = torch.nn.Linear(FEATURES, 16)
            self.kind = torch.nn.Linear(16, 4)
            self.score = torch.nn.Linear(16, 1)

        def forward(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
            h = torch.tanh(self.trunk(features))
            return {"kind": self.kind(h), "score": self.score(h)}

    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(Heads().eval(), (torch.zeros(2, FEATURES),), dynamic_shapes={"features": {0: batch}})
    torch.export.save(program, str(path))
    return path


# -- a PyTorch transformer encoder exported to ONNX ---------------------------------------------------------
SEQ = 16


def encoder_data(n: int = 32, seed: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, (n, SEQ)).astype(np.int64)
    return ids, (ids[:, 0] % 3).astype(np.int64)


def torch_encoder_onnx(path: Path) -> Path:
    """`input_ids` int64 [N, 16] -> embedding -> one nn.TransformerEncoder layer -> mean -> 3 scores
    (`logits`), exported with torch.onnx.export (the TorchScript exporter, a dynamic batch)."""
    import torch

    torch.manual_seed(0)

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, 16)
            layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.head = torch.nn.Linear(16, 3)

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(input_ids)).mean(1))

    model = Encoder().eval()
    torch.onnx.export(model, (torch.zeros(2, SEQ, dtype=torch.int64),), str(path), input_names=["input_ids"],
                      output_names=["logits"], dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=17, dynamo=False)
    return path


# -- a 1-D audio net --------------------------------------------------------------------------------------
def audio_data(n: int = 24, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, AUDIO, dtype=np.float32)
    freq = rng.uniform(5, 60, (n, 1)).astype(np.float32)
    return (np.sin(2 * np.pi * freq * t) + 0.1 * rng.normal(size=(n, AUDIO))).astype(np.float32)[:, None, :]


def torch_audio_pt2(path: Path, dynamic_batch: bool = True) -> Path:
    """`audio` [N, 1, 800] -> two Conv1d + pooling -> `linear` 6 scores (a keyword spotter's shape); exported
    with a free batch dimension, or (`dynamic_batch=False`) at batch 1, as torch.export does by default."""
    import torch

    torch.manual_seed(0)

    class Audio(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv1d(1, 4, 9, stride=4)
            self.conv2 = torch.nn.Conv1d(4, 8, 5, stride=2)
            self.linear = torch.nn.Linear(8, 6)

        def forward(self, audio: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.conv2(torch.relu(self.conv1(audio))))
            return self.linear(h.mean(2))

    batch = torch.export.Dim("batch", min=1, max=4096)
    program = (torch.export.export(Audio().eval(), (torch.zeros(2, 1, AUDIO),), dynamic_shapes={"audio": {0: batch}})
               if dynamic_batch else torch.export.export(Audio().eval(), (torch.zeros(1, 1, AUDIO),)))
    torch.export.save(program, str(path))
    return path


# -- scikit-learn through skl2onnx ---------------------------------------------------------------------------
def forest_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits (bundled with it: nothing downloaded), 8x8 as 64 features; train and test halves."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    return x[:1000], y[:1000].astype(np.int64), x[1000:1200], y[1000:1200].astype(np.int64)


def sklearn_forest(zipmap: bool) -> tuple[bytes, float]:
    """A small random forest on digits as ONNX bytes (outputs `label` int64 [N] and `probabilities`: float
    [N, 10], or with ZipMap a sequence of {class: probability} maps), and scikit-learn's own score on the test
    half."""
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier

    x, y, xt, yt = forest_data()
    clf = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(x, y)
    onx = to_onnx(clf, x[:1], options={id(clf): {"zipmap": zipmap}}, target_opset={"": 17, "ai.onnx.ml": 3})
    return onx.SerializeToString(), float(clf.score(xt, yt))


# -- a small segmenter ------------------------------------------------------------------------------------
SEG = 16


def keras_segmenter(path: Path) -> Path:
    """`image` [N, 16, 16, 3] -> per-pixel scores [N, 16, 16, 3] (a tiny encoder-decoder)."""
    keras = _keras()
    inp = keras.Input((SEG, SEG, 3), name="image")
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inp)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    x = keras.layers.UpSampling2D()(x)
    model = keras.Model(inp, keras.layers.Conv2D(3, 1, name="mask")(x))
    model.save(path)
    return path


def image_data(n: int = 24, size: int = SEG, channels: int = 3, seed: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, (n, size, size, channels)).astype(np.float32)


# -- a fully int8 .tflite ------------------------------------------------------------------------------------
def digits_images(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as [N, 8, 8, 1] images in 0..1, with labels."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(x))[:n]
    return (x[idx] / 16.0).astype(np.float32).reshape(-1, 8, 8, 1), y[idx].astype(np.int64)


def _digits_cnn():
    """A small CNN on digits (`image` [N, 8, 8, 1] in 0..1 -> `digit` 10 scores), fitted briefly."""
    keras = _keras()
    x, y = digits_images(600, seed=1)
    model = keras.Sequential([keras.Input((8, 8, 1), name="image"), keras.layers.Conv2D(8, 3, activation="relu"),
                              keras.layers.Flatten(), keras.layers.Dense(10, name="digit")])
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=10, batch_size=32, verbose=0)
    return model, x


def keras_digits_cnn(path: Path) -> Path:
    """The float digits CNN as `.keras`: one image input named `image`."""
    model, _ = _digits_cnn()
    model.save(path)
    return path


def int8_tflite(path: Path) -> Path:
    """The digits CNN converted by TFLiteConverter with full integer quantization and
    `inference_input_type = inference_output_type = tf.int8`: what a user brings after quantizing elsewhere."""
    import tensorflow as tf

    model, x = _digits_cnn()
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([x[i:i + 1]] for i in range(100))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    Path(path).write_bytes(conv.convert())
    return path


# -- a two-input recurrent SavedModel --------------------------------------------------------------------------
STEPS, STEP_FEATURES, STATIC = 10, 6, 4


def recurrent_data(n: int = 32, seed: int = 9) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"sequence": rng.normal(size=(n, STEPS, STEP_FEATURES)).astype(np.float32),
            "static": rng.normal(size=(n, STATIC)).astype(np.float32)}


def recurrent_saved_model(path: Path) -> Path:
    """`sequence` [N, 10, 6] and `static` [N, 4] -> a GRU over the sequence (a TensorFlow while loop over a
    TensorList) joined with the static features -> 3 scores: a SavedModel saved with tf.saved_model.save."""
    keras = _keras()
    import tensorflow as tf

    seq = keras.Input((STEPS, STEP_FEATURES), name="sequence")
    static = keras.Input((STATIC,), name="static")
    h = keras.layers.GRU(8, unroll=False)(seq)
    model = keras.Model([seq, static], keras.layers.Dense(3, name="scores")(keras.layers.Concatenate()([h, static])))

    @tf.function(input_signature=[tf.TensorSpec([None, STEPS, STEP_FEATURES], tf.float32, name="sequence"),
                                  tf.TensorSpec([None, STATIC], tf.float32, name="static")])
    def serve(sequence, static):
        return {"scores": model([sequence, static], training=False)}

    module = tf.Module()
    module.model = model
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return path


# -- a PyTorch per-pixel model (NCHW in, NCHW out) ---------------------------------------------------------------
def torch_segmenter_pt2(path: Path) -> Path:
    """`image` [N, 3, 16, 16] -> `mask` [N, 2, 16, 16] per-pixel scores: channels-first in and out, which onnx2tf
    turns channels-last inside TFLite."""
    import torch

    torch.manual_seed(0)

    class Seg(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(4, 2, 1)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.conv2(torch.relu(self.conv1(image)))

    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(Seg().eval(), (torch.zeros(2, 3, SEG, SEG),), dynamic_shapes={"image": {0: batch}})
    torch.export.save(program, str(path))
    return path


def torch_audio_frames_pt2(path: Path, dynamic_batch: bool = True) -> Path:
    """`audio` [N, 1, 800] -> `frames` [N, 4, 198]: per-step features of a 1-D conv (channels-first, NCW), which
    onnx2tf turns channels-last inside TFLite; exported with a free batch, or (`dynamic_batch=False`) at batch 1."""
    import torch

    torch.manual_seed(0)

    class Frames(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(1, 4, 9, stride=4)

        def forward(self, audio: torch.Tensor) -> torch.Tensor:
            return torch.tanh(self.conv(audio))

    batch = torch.export.Dim("batch", min=1, max=4096)
    program = (torch.export.export(Frames().eval(), (torch.zeros(2, 1, AUDIO),), dynamic_shapes={"audio": {0: batch}})
               if dynamic_batch else torch.export.export(Frames().eval(), (torch.zeros(1, 1, AUDIO),)))
    torch.export.save(program, str(path))
    return path


def torch_channels_first_pt2(path: Path) -> Path:
    """Two channels-first inputs and outputs in one model (one conversion covers both ranks): `image` [N, 3, 16,
    16] -> `mask` [N, 2, 16, 16] per-pixel scores, and `audio` [N, 1, 800] -> `frames` [N, 4, 198] per-step
    features; returned as a dict. onnx2tf makes both outputs channels-last inside TFLite."""
    import torch

    torch.manual_seed(0)

    class ChannelsFirst(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(4, 2, 1)
            self.conv1d = torch.nn.Conv1d(1, 4, 9, stride=4)

        def forward(self, image: torch.Tensor, audio: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"mask": self.conv2(torch.relu(self.conv1(image))), "frames": torch.tanh(self.conv1d(audio))}

    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(ChannelsFirst().eval(), (torch.zeros(2, 3, SEG, SEG), torch.zeros(2, 1, AUDIO)),
                                  dynamic_shapes={"image": {0: batch}, "audio": {0: batch}})
    torch.export.save(program, str(path))
    return path
