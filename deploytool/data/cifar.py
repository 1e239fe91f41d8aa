"""CIFAR-10 from a local copy: the standard `cifar-10-batches-py` folder (read
with an unpickler that only admits plain containers and numpy arrays, never
arbitrary objects) or `cifar-10-batches-bin`. Nothing is downloaded."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from deploytool.data.raw import RawData, register_dataset
from deploytool.errors import DataError
from deploytool.spec import ModelSpec

_HOW = ("download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html, "
        "unpack it and pass --data-dir path/to/cifar-10-batches-py")


class _ArraysOnly(pickle.Unpickler):
    """The CIFAR pickles hold dicts of bytes, lists and numpy arrays; refuse anything else."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_py_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            d = _ArraysOnly(f, encoding="bytes").load()
        x = np.asarray(d[b"data"], np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return np.ascontiguousarray(x), np.asarray(d[b"labels"], np.int64)
    except (pickle.UnpicklingError, KeyError, ValueError, EOFError) as e:
        raise DataError(f"{path}: not a CIFAR-10 python batch ({e}); {_HOW}") from None


def _read_bin_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    rec = np.fromfile(path, np.uint8)
    if rec.size % 3073:
        raise DataError(f"{path}: not a CIFAR-10 binary batch (size {rec.size}); {_HOW}")
    rec = rec.reshape(-1, 3073)
    x = rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), rec[:, 0].astype(np.int64)


def load(data_dir: Path | None) -> RawData:
    if data_dir is None:
        raise DataError(f"CIFAR-10 is not bundled: {_HOW}")
    d = Path(data_dir)
    if (d / "data_batch_1").exists():
        train_files, test_file, read = [d / f"data_batch_{i}" for i in range(1, 6)], d / "test_batch", _read_py_batch
    elif (d / "data_batch_1.bin").exists():
        train_files, test_file, read = [d / f"data_batch_{i}.bin" for i in range(1, 6)], d / "test_batch.bin", _read_bin_batch
    else:
        raise DataError(f"{d}: no CIFAR-10 batches (data_batch_1 … test_batch) found; {_HOW}")
    missing = [p.name for p in [*train_files, test_file] if not p.exists()]
    if missing:
        raise DataError(f"{d}: missing {', '.join(missing)}; {_HOW}")
    parts = [read(p) for p in train_files]
    xt, yt = read(test_file)
    return RawData(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), xt, yt,
                   f"CIFAR-10 batches in {d}")


@register_dataset("cifar10")
def _load(spec: ModelSpec, data_dir: Path | None) -> RawData:
    return load(data_dir)
