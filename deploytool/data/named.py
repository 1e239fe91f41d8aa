"""A user's test set for a model described by its signature (sequences, token ids and masks, tabular features,
several inputs): `--data file.npz` holds `x` for a single input, or one array per model input named after it
(`input_ids`, `attention_mask`, ...); `y` (optional) holds integer labels (classification) or float targets
(regression); `<input>_train` / `x_train` (and `y_train`) an optional calibration split. Every array is checked
against its input before anything runs — missing, misnamed, mistyped or misshapen, ragged, non-finite — with one
line naming the input, what the model expects and the fix. Dtypes are kept: integer inputs (token ids, masks)
are never scaled or normalized; --scale/--mean/--std apply to image inputs only. The file is read by
`npz.read_inputs` and its labels checked by `npz.labels`, as an image classifier's set is: one loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deploytool.data.feed import Feed
from deploytool.data.npz import labels, read_inputs
from deploytool.errors import DataError, ShapeError
from deploytool.kinds import KINDS
from deploytool.modelfiles.signature import Signature, TensorSpec
from deploytool.spec import Preprocess


def _how(sig: Signature) -> str:
    names = ", ".join(f"{t.name}=..." for t in sig.inputs)
    single = " (or x=... for its one input)" if len(sig.inputs) == 1 else ""
    return f"save with np.savez(path, {names}, y=labels){single}"


def _checked(a: np.ndarray, t: TensorSpec, path: Path, member: str) -> np.ndarray:
    """`a` as input `t` takes it: its dtype (integers stay integers), its rank and its fixed dimensions."""
    where = f"{path}: {member} (for input {t.describe()})"
    if a.ndim == 0:
        raise DataError(f"{where} is a single value (a 0-d array), not one entry per sample")
    if np.iscomplexobj(a) or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise DataError(f"{where} holds {a.dtype}; store numbers")
    if not t.is_float and not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise DataError(f"{where} holds {a.dtype} but the model takes {t.dtype} (token ids, masks): store integers "
                        f"(e.g. ids.astype(np.{t.dtype}))")
    if t.rank == 0:
        raise ShapeError(f"{where}: the model declares this input without dimensions (no shape, or a scalar), so it "
                         "cannot take a batch of samples; export the model with the input's shape, batch first [N, ...]")
    if a.ndim != t.rank:
        raise ShapeError(f"{where} has shape {list(a.shape)}, {a.ndim}-D; the model takes {t.rank}-D samples "
                         f"[N, {', '.join('?' if d is None else str(d) for d in t.sample_shape)}]")
    wrong = [(i, want, got) for i, (want, got) in enumerate(zip(t.shape[1:], a.shape[1:]), 1)
             if want is not None and want != got]
    if wrong:
        i, want, got = wrong[0]
        raise ShapeError(f"{where} has {got} in dimension {i}, the model takes {want} "
                         f"(shape {list(a.shape)} against [N, {', '.join('?' if d is None else str(d) for d in t.sample_shape)}])")
    if t.is_float:
        if np.issubdtype(a.dtype, np.floating) and len(a) and not np.isfinite(a).all():
            bad = np.flatnonzero(~np.isfinite(a.reshape(len(a), -1)).all(1))
            raise DataError(f"{where}: {len(bad)} sample(s) contain NaN or infinity (first: {bad[:5].tolist()}); "
                            "remove or repair them before measuring")
        return np.ascontiguousarray(a, dtype=np.float32)
    info = np.iinfo(np.dtype(t.dtype)) if np.dtype(t.dtype).kind in "iu" else None
    if info is not None and a.size and (a.min() < info.min or a.max() > info.max):
        raise DataError(f"{where} holds values {a.min()}..{a.max()}, outside {t.dtype}")
    return np.ascontiguousarray(a, dtype=np.dtype(t.dtype))


def _preprocessed(a: np.ndarray, t: TensorSpec, p: Preprocess) -> np.ndarray:
    """An input of a kind the images' preprocessing applies to (deploytool.kinds: an image) gets --scale/--mean/--std
    (per channel on the last axis); every other input is fed as stored."""
    if not (t.kind in KINDS and KINDS[t.kind].preprocessed) or p == Preprocess():
        return a
    out = a.astype(np.float32, copy=True)
    out *= np.float32(p.scale)
    out -= np.asarray(p.mean, np.float32)
    out /= np.asarray(p.std, np.float32)
    return out


def load_feeds(path: Path, sig: Signature, p: Preprocess) -> tuple[Feed, np.ndarray, Feed | None, np.ndarray]:
    """(test inputs, test labels, calibration inputs or None, their labels) of a signature's model. numpy's own
    warnings (an overflow in a cast) stay quiet: what they would say is checked and said in one line."""
    with np.errstate(all="ignore"):
        return _load_feeds(path, sig, p)


def _load_feeds(path: Path, sig: Signature, p: Preprocess) -> tuple[Feed, np.ndarray, Feed | None, np.ndarray]:
    read = read_inputs(path, sig.input_names, lambda name: sig.input(name).describe(), _how(sig),
                       "one array per model input")
    test = {t.name: _checked(read.test[t.name], t, path, t.name) for t in sig.inputs}
    sizes = {n: len(a) for n, a in test.items()}
    if len(set(sizes.values())) > 1:
        raise ShapeError(f"{path}: the inputs hold different numbers of samples {sizes}; give every input the "
                         "same samples, in the same order")
    n = next(iter(sizes.values()))
    if n == 0:
        raise DataError(f"{path}: the test set has 0 samples; nothing can be measured on it")
    train = None
    if read.train is not None:
        lengths = {f"{t.name}_train": len(read.train[t.name]) for t in sig.inputs}
        if len(set(lengths.values())) > 1:
            raise ShapeError(f"{path}: the calibration arrays hold different numbers of samples {lengths}; give every "
                             "input the same samples, in the same order")
        train = Feed({t.name: _preprocessed(_checked(read.train[t.name], t, path, f"{t.name}_train"), t, p)
                      for t in sig.inputs})
    feed = Feed({t.name: _preprocessed(test[t.name], t, p) for t in sig.inputs})
    for part, f in (("", feed), ("_train", train)):
        for name, a in (f.items() if f is not None else ()):
            if a.dtype.kind == "f" and not np.isfinite(a).all():  # float64 beyond float32, or scaled past it
                raise DataError(f"{path}: input {name}{part} is not finite as float32 (values beyond ±3.4e38, or "
                                "after --scale/--mean/--std); store values a float32 model can take")
    return (feed, labels(read.y, "y", n, path), train,
            labels(read.y_train, "y_train", len(train), path) if train is not None else np.zeros(0, np.int64))
