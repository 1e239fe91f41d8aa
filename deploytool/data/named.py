"""A user's test set for a model described by its signature (sequences, token ids and masks, tabular features,
several inputs): `--data file.npz` holds `x` for a single input, or one array per model input named after it
(`input_ids`, `attention_mask`, ...); `y` (optional) holds integer labels (classification) or float targets
(regression); `<input>_train` / `x_train` (and `y_train`) an optional calibration split. Every array is checked
against its input before anything runs — missing, misnamed, mistyped or misshapen, ragged, non-finite — with one
line naming the input, what the model expects and the fix. Dtypes are kept: integer inputs (token ids, masks)
are never scaled or normalized; --scale/--mean/--std apply to image inputs only."""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np

from deploytool.data.feed import Feed
from deploytool.data.npz import read_arrays
from deploytool.errors import DataError, ShapeError
from deploytool.modelfiles.signature import Signature, TensorSpec
from deploytool.spec import Preprocess

LABELS = ("y", "y_train")


def _how(sig: Signature) -> str:
    names = ", ".join(f"{t.name}=..." for t in sig.inputs)
    single = " (or x=... for its one input)" if len(sig.inputs) == 1 else ""
    return f"save with np.savez(path, {names}, y=labels){single}"


def _key_for(arrays: dict[str, np.ndarray], t: TensorSpec, sig: Signature) -> str:
    """Which name holds input `t`: a single input's `x` when the file has one (the documented convention, even for
    an input its exporter named `x_train`), else the input's own name."""
    return "x" if len(sig.inputs) == 1 and "x" in arrays else t.name


def _array_for(arrays: dict[str, np.ndarray], t: TensorSpec, sig: Signature, path: Path, split: str) -> np.ndarray | None:
    """The array feeding input `t` in `split` ("" test, "_train" calibration); None for a missing train split."""
    names = [_key_for(arrays, t, sig) + split]
    for name in names:
        if name in arrays:
            return arrays[name]
    if split:
        return None
    inputs = [n for n in arrays if n not in LABELS and not n.endswith("_train")]
    near = difflib.get_close_matches(t.name, inputs, n=1, cutoff=0.5)
    hint = f" (is {near[0]!r} meant for it?)" if near else ""
    raise DataError(f"{path}: no array for input {t.describe()}{hint}; it holds {sorted(arrays) or 'nothing'}; "
                    f"{_how(sig)}")


def _test_array(arrays: dict[str, np.ndarray], t: TensorSpec, sig: Signature, path: Path) -> np.ndarray:
    a = _array_for(arrays, t, sig, path, "")
    assert a is not None  # a missing test array raises
    return a


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
    """Images get --scale/--mean/--std (per channel on the last axis); every other input is fed as stored."""
    if t.kind != "image" or p == Preprocess():
        return a
    out = a.astype(np.float32, copy=True)
    out *= np.float32(p.scale)
    out -= np.asarray(p.mean, np.float32)
    out /= np.asarray(p.std, np.float32)
    return out


def _labels(arrays: dict[str, np.ndarray], name: str, n: int, path: Path) -> np.ndarray:
    if name not in arrays:
        return np.zeros(0, np.int64)
    y = arrays[name]
    if y.ndim == 0:
        raise DataError(f"{path}: {name} is a single value (a 0-d array), not one label per sample")
    if len(y) != n:
        raise ShapeError(f"{path}: {n} samples but {len(y)} labels in {name}")
    if np.issubdtype(y.dtype, np.integer):  # their shape is the task's to judge (deploytool.tasks)
        if y.size and (int(y.max()) > np.iinfo(np.int64).max or int(y.min()) < 0):
            raise DataError(f"{path}: {name} holds class indices {y.min()}..{y.max()}; labels are 0..classes-1")
        return y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating):
        if not np.isfinite(y).all() or not np.isfinite(y.astype(np.float32)).all():
            raise DataError(f"{path}: {name} holds NaN, infinity or values beyond float32 (±3.4e38); regression "
                            "targets must be finite float32 numbers")
        return y.astype(np.float32)
    raise DataError(f"{path}: {name} holds {y.dtype}; labels are integers (classes) or floats (regression targets)")


def _refuse_unknown_arrays(arrays: dict[str, np.ndarray], sig: Signature, path: Path) -> None:
    """An array no input, label or calibration split takes (a typo: `labels` for `y`) would be ignored in silence;
    and an input named `y` would be read as the labels too."""
    if "y" in sig.input_names or "y_train" in sig.input_names:
        raise DataError(f"{path}: the model has an input named 'y', which a test .npz keeps for the labels; export the "
                        "model with another input name")
    keys = {_key_for(arrays, t, sig) for t in sig.inputs}
    known = keys | {k + "_train" for k in keys} | set(LABELS)
    extra = sorted(set(arrays) - known)
    if extra:
        near = (["y"] if extra[0].lower() in ("labels", "label", "targets", "target") else
                difflib.get_close_matches(extra[0], sorted(known), n=1, cutoff=0.5))
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise DataError(f"{path}: array {extra[0]!r}{hint} is none of the model's inputs, their _train splits or the "
                        f"labels y/y_train; {_how(sig)}")


def load_feeds(path: Path, sig: Signature, p: Preprocess) -> tuple[Feed, np.ndarray, Feed | None, np.ndarray]:
    """(test inputs, test labels, calibration inputs or None, their labels) of a signature's model. numpy's own
    warnings (an overflow in a cast) stay quiet: what they would say is checked and said in one line."""
    with np.errstate(all="ignore"):
        return _load_feeds(path, sig, p)


def _load_feeds(path: Path, sig: Signature, p: Preprocess) -> tuple[Feed, np.ndarray, Feed | None, np.ndarray]:
    arrays = read_arrays(path, what="one array per model input", how=_how(sig))
    test = {t.name: _checked(_test_array(arrays, t, sig, path), t, path, t.name) for t in sig.inputs}
    _refuse_unknown_arrays(arrays, sig, path)
    sizes = {n: len(a) for n, a in test.items()}
    if len(set(sizes.values())) > 1:
        raise ShapeError(f"{path}: the inputs hold different numbers of samples {sizes}; give every input the "
                         "same samples, in the same order")
    n = next(iter(sizes.values()))
    if n == 0:
        raise DataError(f"{path}: the test set has 0 samples; nothing can be measured on it")
    train_arrays = {t.name: a for t in sig.inputs if (a := _array_for(arrays, t, sig, path, "_train")) is not None}
    train = None
    if len(train_arrays) == len(sig.inputs):
        lengths = {f"{t.name}_train": len(a) for t, a in zip(sig.inputs, train_arrays.values())}
        if len(set(lengths.values())) > 1:
            raise ShapeError(f"{path}: the calibration arrays hold different numbers of samples {lengths}; give every "
                             "input the same samples, in the same order")
        train = Feed({t.name: _preprocessed(_checked(train_arrays[t.name], t, path, f"{t.name}_train"), t, p)
                      for t in sig.inputs})
    feed = Feed({t.name: _preprocessed(test[t.name], t, p) for t in sig.inputs})
    for part, f in (("", feed), ("_train", train)):
        for name, a in (f.items() if f is not None else ()):
            if a.dtype.kind == "f" and not np.isfinite(a).all():  # float64 beyond float32, or scaled past it
                raise DataError(f"{path}: input {name}{part} is not finite as float32 (values beyond ±3.4e38, or "
                                "after --scale/--mean/--std); store values a float32 model can take")
    return (feed, _labels(arrays, "y", n, path), train,
            _labels(arrays, "y_train", len(train), path) if train is not None else np.zeros(0, np.int64))
