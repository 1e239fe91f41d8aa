"""A large test set handed to a measuring worker as a file, read a slice at a time.

A host row's worker was handed the whole preprocessed test set through its pipe: 5,000 images of 224x224x3 are
2.8 GiB held in the worker beside the model (its peak RSS 752 MiB at 500 images, 3,642 MiB at 5,000). `OnDisk`
is the same array written once as an `.npy` file: it pickles as its path and shape, and each slice
(`x[i:i + 256]`, what the runtimes' batched pass and batch-1 timing take, deploytool.runtimes.measure) is read
from the file then, with plain reads (no memory map, whose touched pages would count in the worker's RSS). So the
worker holds one batch of the set at a time, however many samples it has.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

# A float32 test set larger than this goes to a measuring worker as a file (64 MiB: 85 images of 224x224x3; the
# bundled MNIST's 10,000 samples are 31 MiB and go whole).
STREAM_BYTES = 64 * 2**20
_PREFIX = "deploytool-testset-"


class OnDisk:
    """An (N, ...) array in an .npy file: `len`, `shape`, `dtype`, `nbytes`, and contiguous slices of whole rows
    read from the file when asked for (`np.asarray` of it reads it all)."""

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: str, offset: int) -> None:
        self.path, self.shape, self.dtype, self.offset = Path(path), tuple(shape), np.dtype(dtype), int(offset)

    @classmethod
    def write(cls, array: np.ndarray, path: Path) -> "OnDisk":
        """`array` saved to `path` (.npy, C order)."""
        a = np.ascontiguousarray(array)
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(a))
            offset = f.tell()
            a.tofile(f)
        return cls(path, a.shape, a.dtype.str, offset)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"an on-disk test set reads contiguous slices of samples, not {key!r}")
        start, stop, _ = key.indices(len(self))
        n = max(0, stop - start)
        row = int(np.prod(self.shape[1:], dtype=np.int64))
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * row * self.dtype.itemsize)
            flat = np.fromfile(f, dtype=self.dtype, count=n * row)
        return flat.reshape((n, *self.shape[1:]))

    def batches(self, size: int) -> Iterator[np.ndarray]:
        """The set in consecutive batches of `size` samples (the last one shorter), each read into the same buffer:
        a batch is valid until the next one is read. The batched pass (deploytool.runtimes.measure.run_batched)
        takes them so: a fresh 150 MiB array per batch of 256 images cost a page fault per 4 KiB, about a quarter
        of a small model's time (bench/bench_real_size.py)."""
        row = int(np.prod(self.shape[1:], dtype=np.int64))
        buf = np.empty((min(size, len(self)), *self.shape[1:]), dtype=self.dtype)
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            for start in range(0, len(self), size):
                n = min(size, len(self) - start)
                view = buf[:n]
                got = f.readinto(view.data.cast("B"))
                if got != n * row * self.dtype.itemsize:
                    raise OSError(f"{self.path}: {got} bytes read of {n * row * self.dtype.itemsize} (the file "
                                  "was cut short)")
                yield view

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype, copy=False)


def scratch_dir() -> Path:
    """A folder of this process for test sets on disk (removed by `remove_scratch`); folders that processes which
    no longer run left behind (killed with SIGKILL) are removed first."""
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob(f"{_PREFIX}*"):
        pid = old.name[len(_PREFIX):].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))


def remove_scratch(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
