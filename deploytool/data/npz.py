"""A user's own test set as .npz with arrays `x` (NHWC) and `y` (integer
labels); optional `x_train`/`y_train` are used for calibration. Loaded with
allow_pickle=False: an object array is refused, never unpickled. Each member's
declared shape is read from its header before anything is allocated, so a file
that claims more than this machine can hold is refused instead of exhausting
memory."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from deploytool.data.raw import RawData
from deploytool.errors import DataError, first_line_of

MEMBERS = ("x", "y", "x_train", "y_train")
_HOW = "save with np.savez(path, x=images, y=labels)"


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


def read_arrays(path: Path, members: tuple[str, ...] | None = None, what: str = "arrays x (N,H,W,C) and y (N,)",
                how: str = _HOW) -> dict[str, np.ndarray]:
    """The arrays of a test .npz (those named in `members`, or all), read without pickle once their declared sizes
    (from the .npy headers) were found to fit in memory. The one reader of a user's .npz: every mistake is one
    DataError naming the file, `what` it should hold and `how` to save it."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file; pass an .npz with {what}")
    try:
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
    except DataError:
        raise
    except MemoryError:
        raise DataError(f"{path}: the arrays do not fit in memory; pass a smaller test set") from None
    except ValueError as e:
        if "allow_pickle" in str(e) or "Object arrays" in str(e):
            raise DataError(f"{path}: an array holds Python objects (ragged rows of different lengths?), which are "
                            "never unpickled; store each input as one rectangular array of numbers (pad sequences "
                            f"to one length and pass a mask); {how}") from None
        raise DataError(f"{path}: not a readable .npz ({first_line_of(str(e)) or 'ValueError'}); {how}") from None
    except (OSError, zipfile.BadZipFile, EOFError, KeyError) as e:
        raise DataError(f"{path}: not a readable .npz ({first_line_of(str(e)) or type(e).__name__}); {how}") from None


def load(path: Path, input_name: str = "") -> RawData:
    """`x` (or an array named after the model's one input, `input_name`) and, optionally, integer labels `y`."""
    path = Path(path)
    members = (*MEMBERS, input_name, f"{input_name}_train") if input_name else MEMBERS
    arrays = read_arrays(path, members)
    xname = "x" if "x" in arrays else input_name if input_name in arrays else ""
    if not xname:
        named = f" or {input_name!r} (the model's input)" if input_name and input_name != "x" else ""
        found = sorted(declared_members(path))
        raise DataError(f"{path}: needs the images as array 'x'{named}, found {found or 'none'}; "
                        f"{_HOW} (y is optional)")
    x = arrays[xname]
    y = arrays.get("y", np.zeros(0, np.int64))  # no labels: compared with the baseline alone
    _refuse_scalars(path, x=x, y=y)
    x_train = arrays.get(f"{xname}_train", x[:0])
    y_train = arrays.get("y_train", y[:0])
    _refuse_scalars(path, x_train=x_train, y_train=y_train)
    for name, a in (("x", x), ("x_train", x_train)):
        if np.iscomplexobj(a):
            raise DataError(f"{path}: {name} holds complex numbers ({a.dtype}); images are real: store the real part "
                            "(or magnitude) explicitly")
    if np.issubdtype(x.dtype, np.number) and np.issubdtype(y.dtype, np.floating):
        raise DataError(f"{path}: y holds floats ({y.dtype}), but an image classifier's labels are integer class "
                        "indices; store y.astype(int), or pass --task regression for regression targets")
    if not np.issubdtype(x.dtype, np.number) or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{path}: x must be numeric and y integer labels (got {x.dtype}, {y.dtype})")
    if len(x_train) and (not np.issubdtype(x_train.dtype, np.number) or not np.issubdtype(y_train.dtype, np.integer)):
        raise DataError(f"{path}: x_train must be numeric and y_train integer labels "
                        f"(got {x_train.dtype}, {y_train.dtype})")
    return RawData(x_train, y_train, x, y, f"user test set {path}")
