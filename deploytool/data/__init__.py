"""`Dataset`: the train and test arrays of one model, preprocessed once, here.

Loaders (registered by name in `DATASETS`, each by its own module with
`@register_dataset`) return raw images (NHWC, as stored; a user's .npz may
hold them NCHW) and labels; `load_dataset` checks their shape against the manifest, applies
the manifest's preprocessing in one place and records a checksum of the
resulting bytes. Every later stage (the PC baseline, each converter's
calibration, every runtime, browser and phone) receives exactly these bytes.
The test set is held once: always indexed NHWC, stored in memory in the
model's layout, so feeding an NCHW model copies nothing. Nothing here trains
or converts.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import IMPLIED_INPUT, Artifact
from deploytool.data import cifar, mnist, npz, synthetic  # noqa: F401  (the loaders register themselves)
from deploytool.data.check import preprocessing_warnings
from deploytool.data.feed import Feed
from deploytool.data.named import load_feeds
from deploytool.data.raw import DATASETS, RawData, register_dataset
from deploytool.errors import DataError, ShapeError
from deploytool.kinds import get_kind
from deploytool.modelfiles.signature import Signature
from deploytool.spec import ModelSpec, Preprocess
from deploytool.value import value


@value
class Dataset:
    name: str
    x_train: np.ndarray | Feed  # float32, NHWC, preprocessed; a model with a signature: its named inputs, dtypes kept
    y_train: np.ndarray  # int64
    x_test: np.ndarray | Feed  # as stored; every stage is fed `in_layout(x_test, ...)`, the model's named inputs
    y_test: np.ndarray
    labels: tuple[str, ...]
    preprocess: Preprocess
    origin: str
    sha256: str  # of the preprocessed bytes (test and train)
    train_sha256: str = ""  # of the preprocessed training bytes alone: what a trained model depends on
    warnings: tuple[str, ...] = ()  # where the raw test set does not fit the declared preprocessing (data/check.py)

    def in_layout(self, x: np.ndarray | Feed, layout: str, name: str = IMPLIED_INPUT) -> Feed:
        """A model's named inputs: its own (a Feed) as the user stored them (their layout is the model's own); an
        image or sequence set as the one input `name`, fed NCHW for PyTorch-born models: an explicit transpose,
        never a reshape, free (a view) when `x` is already stored in that layout."""
        if isinstance(x, Feed):
            return x
        if layout == "NCHW":
            x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        elif layout != "NHWC":
            raise ValueError(f"unknown layout {layout}")
        return Feed.one(name, x)

    def feed_for(self, x: np.ndarray | Feed, artifact: Artifact) -> Feed:
        """What every runtime, converter and tracer is given for `artifact`: its named inputs (in_layout), an image
        set under the name of the artifact's one input (Artifact.signature)."""
        return self.in_layout(x, artifact.layout, artifact.signature.inputs[0].name)

    def images(self, x: Any) -> "Images | None":
        """Undo the preprocessing for display (gallery), one image at a time: values in [0, 1]. None for a
        model's named inputs: sequences, tokens and features are shown as values, not pictures."""
        return None if isinstance(x, Feed) else Images(x, self.preprocess)

    def calibration(self, n: int = 200, seed: int = 0) -> np.ndarray:
        """A fixed sample of the training split: representative data for int8 calibration."""
        rng = np.random.default_rng(seed)
        idx = np.sort(rng.choice(len(self.x_train), size=min(n, len(self.x_train)), replace=False))
        return self.x_train[idx]


class Images:
    """The test set as images for display, computed per index: the gallery shows a few, never a copy of all."""

    def __init__(self, x: np.ndarray, p: Preprocess):
        self.x, self.p = x, p

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: Any) -> Any:
        p = self.p
        raw = (np.asarray(self.x[index], np.float32) * np.asarray(p.std, np.float32)
               + np.asarray(p.mean, np.float32)) / p.scale
        hi = 255.0 if p.scale < 0.5 else 1.0 / p.scale
        return np.clip(raw / hi, 0.0, 1.0)


def apply_preprocess(x: np.ndarray, p: Preprocess, layout: str = "NHWC") -> np.ndarray:
    """Float32, preprocessed, in a new array (the raw data is never modified), indexed NHWC and stored in
    `layout`'s memory order (NCHW: an NHWC view of an NCHW array)."""
    if layout == "NCHW":
        out = np.array(x.transpose(0, 3, 1, 2), dtype=np.float32, order="C").transpose(0, 2, 3, 1)
    else:
        out = np.array(x, dtype=np.float32, order="C")
    out *= np.float32(p.scale)
    out -= np.asarray(p.mean, np.float32)
    out /= np.asarray(p.std, np.float32)
    return out


def _checksum(*arrays: np.ndarray, chunk: int = 1024) -> str:
    """Of the arrays' NHWC bytes whatever their memory order; in chunks, so no whole copy is made."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(str(a.shape).encode())
        for i in range(0, len(a), chunk):
            h.update(np.ascontiguousarray(a[i:i + chunk]).tobytes())
    return h.hexdigest()


def _as_nhwc(x: np.ndarray, shape: tuple[int, int, int], where: str, model_layout: str = "NHWC",
             data_layout: str | None = None) -> np.ndarray:
    """`x` indexed NHWC (an NCHW array becomes a transposed view, never a copy). NCHW data is taken when
    --data-layout NCHW says so, or when the model is NCHW and the shape fits NCHW only."""
    if x.ndim == 3 and shape[2] == 1:
        x = x[..., None]
    h, w, c = shape
    got = tuple(x.shape[1:])
    fits_nhwc, fits_nchw = x.ndim == 4 and got == (h, w, c), x.ndim == 4 and got == (c, h, w)
    if data_layout is None and fits_nchw and fits_nhwc and model_layout == "NCHW":
        raise ShapeError(f"{where}: samples have shape {got}, which reads as NHWC and as NCHW alike; "
                         "pass --data-layout NHWC or NCHW")
    layout = data_layout or ("NHWC" if fits_nhwc else "NCHW" if fits_nchw and model_layout == "NCHW" else "NHWC")
    if layout == "NCHW" and fits_nchw:
        return x.transpose(0, 2, 3, 1)
    if layout == "NHWC" and fits_nhwc:
        return x
    expected = (c, h, w) if layout == "NCHW" else (h, w, c)
    hint = ""
    if data_layout is None and fits_nchw:
        hint = (" (it looks NCHW; pass --data-layout NCHW, or store it NHWC: x.transpose(0, 2, 3, 1))")
    raise ShapeError(f"{where}: samples have shape {got}, the model expects {expected} "
                     f"({'channels, height, width' if layout == 'NCHW' else 'height, width, channels'}){hint}")


def _refuse_non_finite(x: np.ndarray, part: str, where: str) -> None:
    """NaN/inf pixels make every runtime's output arbitrary: judged, they give false verdicts."""
    if x.dtype.kind != "f" or len(x) == 0:
        return
    axes = tuple(range(1, x.ndim))
    bad = np.concatenate([~np.isfinite(x[i:i + 1024]).all(axis=axes) for i in range(0, len(x), 1024)])
    if bad.any():
        first = np.flatnonzero(bad)[:5].tolist()
        raise DataError(f"{where}: {int(bad.sum())} {part} sample(s) contain NaN or infinity (first: {first}); "
                        "remove or repair them before measuring")


def _all_finite(x: np.ndarray, chunk: int = 1024) -> bool:
    return all(np.isfinite(x[i:i + chunk]).all() for i in range(0, len(x), chunk))


def load_raw(dataset: str, spec: ModelSpec, data_dir: Path | None) -> RawData:
    """The raw arrays of a registered dataset (`DATASETS`: each loader module registers its own)."""
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}")
    return DATASETS[dataset](spec, data_dir)


def load_dataset(spec: ModelSpec, data_dir: Path | None = None, test_npz: Path | None = None,
                 limit_train: int | None = None, limit_test: int | None = None,
                 data_layout: str | None = None) -> Dataset:
    """The manifest's dataset (or a user's test .npz), shape-checked and preprocessed, held in the
    model's layout. `data_layout`: how a user's .npz stores x (None: NHWC, or NCHW when unambiguous)."""
    if spec.signature is not None:  # a test set of one array per named input, not of images
        return _load_named(spec, spec.signature, test_npz, limit_test)
    if test_npz is not None:
        raw = npz.load(test_npz, spec.input_name)
        name = f"npz:{Path(test_npz).name}"
    else:
        raw = load_raw(spec.dataset, spec, data_dir)
        name = spec.dataset
    where = str(test_npz) if test_npz else name
    if len(raw.x_test) == 0:
        raise DataError(f"{where}: the test set has 0 samples; nothing can be measured on it")
    x_test = _as_nhwc(raw.x_test, spec.hwc, where, spec.layout, data_layout)
    x_train = (_as_nhwc(raw.x_train, spec.hwc, where, spec.layout, data_layout) if len(raw.x_train)
               else x_test[:0])
    y_test, y_train = raw.y_test.astype(np.int64).ravel(), raw.y_train.astype(np.int64).ravel()
    for y, x in ((y_test, x_test), (y_train, x_train)):
        if len(y) != len(x) and len(y):  # no labels at all: compared with the PC baseline's outputs alone
            raise ShapeError(f"{where}: {len(x)} samples but {len(y)} labels")
        if len(y) and (y.min() < 0 or y.max() >= spec.num_classes):
            raise DataError(f"{where}: labels must be in 0..{spec.num_classes - 1} "
                            f"(the manifest lists {spec.num_classes} classes), found {y.min()}..{y.max()}")
    for part, x in (("test", x_test), ("training", x_train)):
        _refuse_non_finite(x, part, where)
    if limit_train is not None:
        x_train, y_train = x_train[:limit_train], y_train[:limit_train]
    if limit_test is not None and limit_test < len(x_test):
        # spread over the whole split, not its first N: a split stored sorted by label (the bundled MNIST) would
        # otherwise give N images of one digit
        keep = spread_indices(len(x_test), limit_test)
        x_test, y_test = x_test[keep], y_test[keep]
    origin = raw.origin

    warnings = tuple(preprocessing_warnings(x_test, spec.preprocess))
    del raw  # the raw arrays go as soon as the preprocessed ones exist
    xtr = apply_preprocess(x_train, spec.preprocess, spec.layout)
    xte = apply_preprocess(x_test, spec.preprocess, spec.layout)
    del x_train, x_test
    for part, x in (("test", xte), ("training", xtr)):
        if not _all_finite(x):  # finite raw values can overflow float32 after scaling
            raise DataError(f"{where}: the {part} samples are not finite after preprocessing "
                            f"(scale {spec.preprocess.scale:g}, mean {spec.preprocess.mean}, std {spec.preprocess.std}); "
                            "check --scale/--mean/--std")
    kind = get_kind(spec.input_kind)  # the images as the architecture reads them: as they are, rows as steps, flat
    xtr, xte = kind.from_images(xtr), kind.from_images(xte)
    return Dataset(name=name, x_train=xtr, y_train=y_train, x_test=xte, y_test=y_test,
                   labels=spec.labels, preprocess=spec.preprocess, origin=origin,
                   sha256=_checksum(xte, y_test, xtr, y_train), train_sha256=_checksum(xtr, y_train),
                   warnings=warnings)


def spread_indices(total: int, n: int) -> np.ndarray:
    """`n` indices (n <= total) evenly spread over 0..total-1, in order: the first and the last included."""
    return np.unique(np.linspace(0, total - 1, num=n).round().astype(np.int64))


def _load_named(spec: ModelSpec, sig: Signature, test_npz: Path | None, limit_test: int | None) -> Dataset:
    """A model described by its signature (deploytool.data.named): one array per input, dtypes kept."""
    if test_npz is None:
        raise DataError(f"{spec.source}: a model file needs its test set: pass --data test.npz with one array per "
                        f"input ({', '.join(sig.input_names)}) and, optionally, labels y")
    x_test, y_test, x_train, y_train = load_feeds(Path(test_npz), sig, spec.preprocess)
    if spec.labels and len(y_test) and y_test.dtype.kind in "iu" and (y_test.min() < 0 or y_test.max() >= len(spec.labels)):
        raise DataError(f"{test_npz}: labels must be in 0..{len(spec.labels) - 1} (the model's first output has "
                        f"{len(spec.labels)} classes), found {y_test.min()}..{y_test.max()}")
    if limit_test is not None and limit_test < len(x_test):
        keep = spread_indices(len(x_test), limit_test)
        x_test = x_test[keep]
        y_test = y_test[keep] if len(y_test) else y_test
    if x_train is None:
        x_train = x_test[:0]
    arrays = [*x_test.arrays(), y_test, *x_train.arrays(), y_train]
    return Dataset(name=f"npz:{Path(test_npz).name}", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
                   labels=spec.labels, preprocess=spec.preprocess, origin=f"user test set {test_npz}",
                   sha256=_checksum(*arrays), train_sha256=_checksum(*x_train.arrays(), y_train))


__all__ = ["DATASETS", "Dataset", "Images", "RawData", "apply_preprocess", "load_dataset", "load_raw",
           "register_dataset", "spread_indices"]
