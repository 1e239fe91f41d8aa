"""Tiny source models for the conversion and host-runtime tests, built and
trained here (not checked in): the same 2-conv CNN in Keras (NHWC, saved as
.keras) and in PyTorch (NCHW, a torch.export program with a dynamic batch
saved as .pt2), trained for a few epochs on scikit-learn's bundled 8x8
digits so that quantized variants have real margins to keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact, content_hash, size_on_disk

N_TRAIN = 1000
SEED = 0


@dataclass(frozen=True)
class Source:
    artifact: Artifact
    x_train: np.ndarray  # float32 in the artifact's layout
    x_test: np.ndarray
    y_test: np.ndarray
    reference: np.ndarray  # the source model's outputs on x_test


def digits() -> tuple[np.ndarray, np.ndarray]:
    """(N, 8, 8, 1) float32 in [0, 1] and int labels; bundled with scikit-learn, no download."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32)[..., None], d.target.astype(np.int64)


def _artifact(path: Path, fmt: str, framework: str, layout: str, input_shape: tuple[int, ...]) -> Artifact:
    return Artifact(path=path, format=fmt, framework=framework, layout=layout, input_shape=input_shape,
                    num_outputs=10, sha256=content_hash(path), size_bytes=size_on_disk(path))


def build_keras(out_dir: Path, epochs: int = 5) -> Source:
    import keras

    x, y = digits()
    keras.utils.set_random_seed(SEED)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x[:N_TRAIN], y[:N_TRAIN], epochs=epochs, batch_size=50, verbose=0)
    path = Path(out_dir) / "tiny.keras"
    model.save(path)
    x_test = x[N_TRAIN:]
    reference = np.asarray(model.predict(x_test, verbose=0), dtype=np.float32)
    return Source(_artifact(path, "keras", "keras", "NHWC", (8, 8, 1)), x[:N_TRAIN], x_test, y[N_TRAIN:],
                  reference)


def export_keras_saved_model(source: Source, out_dir: Path) -> Artifact:
    """The same Keras model as a user's SavedModel directory (model.export)."""
    import keras

    path = Path(out_dir) / "tiny_saved_model"
    keras.saving.load_model(source.artifact.path).export(str(path), verbose=False)
    return _artifact(path, "saved_model", "keras", "NHWC", (8, 8, 1))


def build_torch(out_dir: Path, epochs: int = 8) -> Source:
    import torch

    torch.set_num_threads(1)

    class TinyCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = torch.nn.Conv2d(1, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
            self.fc = torch.nn.Linear(16 * 2 * 2, 10)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
            x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
            return self.fc(torch.flatten(x, 1))

    x, y = digits()
    x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))  # NCHW
    torch.manual_seed(SEED)
    model = TinyCNN()
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    xt, yt = torch.from_numpy(x[:N_TRAIN]), torch.from_numpy(y[:N_TRAIN])
    for _ in range(epochs):
        for i in range(0, N_TRAIN, 50):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt[i : i + 50]), yt[i : i + 50]).backward()
            opt.step()
    model.eval()
    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(model, (xt[:2],), dynamic_shapes=({0: batch},))
    path = Path(out_dir) / "tiny.pt2"
    torch.export.save(program, path)
    x_test = x[N_TRAIN:]
    with torch.no_grad():
        reference = model(torch.from_numpy(x_test)).numpy().astype(np.float32)
    return Source(_artifact(path, "torch", "torch", "NCHW", (1, 8, 8)), x[:N_TRAIN], x_test, y[N_TRAIN:],
                  reference)


def agreement(a: np.ndarray, b: np.ndarray) -> float:
    return float((a.argmax(1) == b.argmax(1)).mean())


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max())
