"""A user's test set as .npz: the one loader of every model's test file. An image classifier's set holds `x`
(NHWC, or NCHW where the model is) and, optionally, integer labels `y`; a model described by its signature
(data/named.py) holds `x` for a single input or one array per input named after it; either may add a
calibration split (`x_train` / `<input>_train`, `y_train`). `read_inputs` resolves which array feeds which input
from the file's member names alone, refuses a member no input, split or label takes (a typo: `labels` for `y`)
before anything is read, and reads only what feeds the model; `labels` checks the labels the same way for every
model. Loaded with allow_pickle=False: an object array is refused, never unpickled. Each member's declared shape
is read from its header before anything is allocated, so a file that claims more than this machine can hold is
refused instead of exhausting memory."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Collection
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

import numpy as np

from deploytool.data.raw import RawData
from deploytool.errors import DataError, ShapeError, first_line_of

LABELS = ("y", "y_train")
_HOW = "save with np.savez(path, x=images, y=labels)"
_WHAT = "arrays x (N,H,W,C) and y (N,)"


def declared_members(path: Path, members: tuple[str, ...] | None = None) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """member -> (shape, dtype) from the .npy headers (of `members`, or of all), without reading the arrays."""
    out = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if members is not None and name not in members:
                continue
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                shape, _, dtype = read(fh)
            out[name] = (tuple(int(d) for d in shape), np.dtype(dtype))
    return out


def memory_limit_bytes() -> int:
    """A quarter of the memory available now (the kernel's MemAvailable; psutil where /proc is not there)."""
    try:
        with open("/proc/meminfo") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
        return kib * 1024 // 4
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().available // 4)
    except Exception:
        return 8 << 30


def _refuse_scalars(path: Path, **arrays: np.ndarray) -> None:
    """A 0-d array holds one value, not one per sample: nothing can be indexed by sample in it."""
    for name, a in arrays.items():
        if a.ndim == 0:
            raise DataError(f"{path}: {name} is a single value (a 0-d array), not one entry per sample; "
                            f"{_HOW}, with one row per sample")


class _Reading:
    """`with _Reading(path, how):` every way a file can fail to read as an .npz, as one DataError naming it and `how`
    to save it. It never swallows an error (`__exit__` returns None), so a `return` inside it is the only way out."""

    def __init__(self, path: Path, how: str):
        self.path, self.how = path, how

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        path, how = self.path, self.how
        if e is None or isinstance(e, DataError):
            return
        if isinstance(e, MemoryError):
            raise DataError(f"{path}: the arrays do not fit in memory; pass a smaller test set") from None
        if isinstance(e, ValueError) and ("allow_pickle" in str(e) or "Object arrays" in str(e)):
            raise DataError(f"{path}: an array holds Python objects (ragged rows of different lengths?), which are "
                            "never unpickled; store each input as one rectangular array of numbers (pad sequences "
                            f"to one length and pass a mask); {how}") from None
        if isinstance(e, (ValueError, OSError, zipfile.BadZipFile, EOFError, KeyError)):
            raise DataError(f"{path}: not a readable .npz ({first_line_of(str(e)) or type(e).__name__}); "
                            f"{how}") from None


def read_arrays(path: Path, members: tuple[str, ...] | None = None, what: str = _WHAT,
                how: str = _HOW) -> dict[str, np.ndarray]:
    """The arrays of a test .npz (those named in `members`, or all), read without pickle once their declared sizes
    (from the .npy headers) were found to fit in memory. The one reader of a user's .npz: every mistake is one
    DataError naming the file, `what` it should hold and `how` to save it."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file; pass an .npz with {what}")
    with _Reading(path, how):
        declared = declared_members(path, members)
        # The float32 copy made by preprocessing needs 4 bytes a value whatever the stored dtype.
        need = sum(int(np.prod(shape, dtype=np.float64)) * max(4, dt.itemsize) for shape, dt in declared.values())
        limit = memory_limit_bytes()
        if need > limit:
            raise DataError(f"{path}: its arrays declare {need / 2**30:.1f} GiB ("
                            f"{', '.join(f'{k} {list(s)}' for k, (s, _) in declared.items())}), more than this machine "
                            f"can hold ({limit / 2**30:.1f} GiB usable); pass a smaller test set")
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files if members is None or name in members}


class Inputs(NamedTuple):
    """A test .npz read by its model's inputs: each input's test samples, every input's calibration samples (None
    unless the file has a split for each), and the raw labels of each split (None where the file has none)."""
    test: dict[str, np.ndarray]
    train: dict[str, np.ndarray] | None
    y: np.ndarray | None
    y_train: np.ndarray | None


def _member_for(names: Collection[str], name: str, single: bool) -> str:
    """Which member holds input `name`: a single input's `x` when the file has one (the documented convention, even
    for an input its exporter named `x_train`), else the input's own name."""
    return "x" if single and "x" in names else name


def read_inputs(path: Path, inputs: tuple[str, ...], describe: Callable[[str], str], how: str,
                what: str) -> Inputs:
    """The members feeding `inputs` (and their splits and labels), resolved from the file's member names before
    any array is read: a missing input (with the nearest name it holds), an input named like the labels, and a
    member nothing takes are each one DataError naming the file (`describe` words an input, `how` says how to save
    the file, `what` what it should hold)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file; pass an .npz with {what}")
    with _Reading(path, how):
        names = set(declared_members(path))
    test: dict[str, str] = {}
    for name in inputs:
        member = _member_for(names, name, len(inputs) == 1)
        if member in LABELS:  # a single input's `x` is unambiguous, whatever the input is called
            raise DataError(f"{path}: the model has an input named {name!r}, which a test .npz keeps for the labels; "
                            "store its samples as x (a single input), or export the model with another input name")
        if member not in names:
            held = sorted(n for n in names if n not in LABELS and not n.endswith("_train"))
            near = _nearest(name, held)
            hint = f" (is {near[0]!r} meant for it?)" if near else ""
            raise DataError(f"{path}: no array for input {describe(name)}{hint}; it holds {sorted(names) or 'nothing'}; "
                            f"{how}")
        test[name] = member
    train = {name: m + "_train" for name, m in test.items() if m + "_train" in names}
    known = {*test.values(), *(m + "_train" for m in test.values()), *LABELS}
    extra = sorted(names - known)
    if extra:
        near = (["y"] if extra[0].lower() in ("labels", "label", "targets", "target") else
                _nearest(extra[0], sorted(known)))
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise DataError(f"{path}: array {extra[0]!r}{hint} is none of the model's inputs, their _train splits or the "
                        f"labels y/y_train; {how}")
    arrays = read_arrays(path, (*test.values(), *train.values(), *(n for n in LABELS if n in names)), what, how)
    return Inputs({name: arrays[m] for name, m in test.items()},
                  {name: arrays[m] for name, m in train.items()} if len(train) == len(inputs) else None,
                  arrays.get("y"), arrays.get("y_train"))


def labels(y: np.ndarray | None, name: str, n: int, path: Path) -> np.ndarray:
    """A split's labels as every model's are checked: one per sample, class indices (int64, from 0) or finite
    float32 regression targets; none (an empty array) where the file has none. Their shape and range are the
    task's and the model's to judge."""
    if y is None:
        return np.zeros(0, np.int64)
    if y.ndim == 0:
        raise DataError(f"{path}: {name} is a single value (a 0-d array), not one label per sample")
    if len(y) != n:
        raise ShapeError(f"{path}: {n} samples but {len(y)} labels in {name}")
    if np.issubdtype(y.dtype, np.integer):
        if y.size and (int(y.max()) > np.iinfo(np.int64).max or int(y.min()) < 0):
            raise DataError(f"{path}: {name} holds class indices {y.min()}..{y.max()}; labels are 0..classes-1")
        return y.astype(np.int64)
    if np.issubdtype(y.dtype, np.floating):
        if not np.isfinite(y).all() or not np.isfinite(y.astype(np.float32)).all():
            raise DataError(f"{path}: {name} holds NaN, infinity or values beyond float32 (±3.4e38); regression "
                            "targets must be finite float32 numbers")
        return y.astype(np.float32)
    raise DataError(f"{path}: {name} holds {y.dtype}; labels are integers (classes) or floats (regression targets)")


def load(path: Path, input_name: str = "") -> RawData:
    """An image classifier's test set: `x` (or an array named after the model's one input, `input_name`), read by
    `read_inputs` as any model's is, and, optionally, integer labels `y` (none: compared with the baseline alone).
    Its layout (NHWC, or NCHW for an NCHW model) is checked where the model's shape is known."""
    path = Path(path)
    name = input_name or "x"
    images = "'x' (the images" + (f"; or {name!r}, the model's input)" if name != "x" else ")")
    read = read_inputs(path, (name,), lambda _: images, f"{_HOW} (y is optional)", _WHAT)
    x = read.test[name]
    _refuse_scalars(path, x=x)
    x_train = read.train[name] if read.train is not None else x[:0]
    _refuse_scalars(path, x_train=x_train)
    for part, a in (("x", x), ("x_train", x_train)):
        if np.iscomplexobj(a):
            raise DataError(f"{path}: {part} holds complex numbers ({a.dtype}); images are real: store the real part "
                            "(or magnitude) explicitly")
        if not np.issubdtype(a.dtype, np.number):
            raise DataError(f"{path}: {part} must hold numbers (got {a.dtype}); {_HOW}")
    for part, y in (("y", read.y), ("y_train", read.y_train)):
        if y is not None and np.issubdtype(y.dtype, np.floating):
            raise DataError(f"{path}: {part} holds floats ({y.dtype}), but an image classifier's labels are integer "
                            "class indices; store y.astype(int), or pass --task regression for regression targets")
    y = labels(read.y, "y", len(x), path)
    y_train = labels(read.y_train, "y_train", len(x_train), path) if read.train is not None else y[:0]
    return RawData(x_train, y_train, x, y, f"user test set {path}")


def _nearest(name: str, names: list[str]) -> list[str]:
    """The name in `names` closest to `name`, if any is close: only a refusal needs it (difflib loads then)."""
    import difflib

    return difflib.get_close_matches(name, names, n=1, cutoff=0.5)
