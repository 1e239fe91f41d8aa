"""A user's own test set as .npz with arrays `x` (NHWC) and `y` (integer
labels); optional `x_train`/`y_train` are used for calibration. Loaded with
allow_pickle=False: an object array is refused, never unpickled."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from deploytool.data import RawData
from deploytool.errors import DataError


def load(path: Path) -> RawData:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file; pass an .npz with arrays x (N,H,W,C) and y (N,)")
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            if not {"x", "y"} <= keys:
                raise DataError(f"{path}: needs arrays 'x' and 'y', found {sorted(keys) or 'none'}; "
                                "save with np.savez(path, x=images, y=labels)")
            x, y = z["x"], z["y"]
            x_train = z["x_train"] if "x_train" in keys else x[:0]
            y_train = z["y_train"] if "y_train" in keys else y[:0]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(f"{path}: not a readable .npz ({str(e).splitlines()[0]}); "
                        "save with np.savez(path, x=images, y=labels)") from None
    if not np.issubdtype(x.dtype, np.number) or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{path}: x must be numeric and y integer labels (got {x.dtype}, {y.dtype})")
    return RawData(x_train, y_train, x, y, f"user test set {path}")
