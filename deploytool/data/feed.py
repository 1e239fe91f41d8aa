"""`Feed`: the named arrays a model takes (or gives) for a batch of samples — one per input, in the model's
order, each with its own dtype (token ids stay int64, masks int32, images float32). It slices like one array:
`len(feed)` is the number of samples and `feed[i:j]` (or `feed[indices]`) the same samples of every array, so
the measuring loops that take batches of one array take a Feed unchanged. A value; it never converts dtypes
or layouts on its own (`cast` and `map` say so when asked)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from deploytool.artifact import IMPLIED_INPUT, array_sha256


class Feed:
    __slots__ = ("_arrays",)

    def __init__(self, arrays: dict[str, np.ndarray]):
        # made for every batch a runtime is given and gives back, inside timed calls: one array needs no check
        if len(arrays) != 1:
            if not arrays:
                raise ValueError("a Feed holds at least one array")
            lengths = {name: len(a) for name, a in arrays.items()}
            if len(set(lengths.values())) > 1:
                raise ValueError(f"the arrays of one feed must hold the same number of samples, got {lengths}")
        self._arrays = dict(arrays)

    @classmethod
    def one(cls, name: str, array: np.ndarray) -> "Feed":
        return cls({name: array})

    @classmethod
    def concat(cls, feeds: list["Feed"]) -> "Feed":
        names = feeds[0].names
        return cls({n: np.concatenate([f[n] for f in feeds], axis=0) for n in names})

    # -- a batch of samples ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(next(iter(self._arrays.values())))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._arrays[key]
        return Feed({n: a[key] for n, a in self._arrays.items()})

    def __contains__(self, name: object) -> bool:
        return name in self._arrays

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Feed) and self.names == other.names
                and all(np.array_equal(self[n], other[n]) and self[n].dtype == other[n].dtype for n in self.names))

    def __repr__(self) -> str:
        return "Feed(" + ", ".join(f"{n}: {a.dtype}{list(a.shape)}" for n, a in self._arrays.items()) + ")"

    def batches(self, size: int) -> Iterator["Feed"]:
        """The samples in consecutive batches of `size` (the last one shorter). An array that reads its own batches
        (deploytool.data.ondisk.OnDisk, a large test set in a file standing in for its array: each batch read into
        one reused buffer) is read so, and such a batch is valid until the next one is read."""
        def slices(a: Any) -> Iterator[Any]:
            return a.batches(size) if hasattr(a, "batches") else (a[i:i + size] for i in range(0, len(a), size))

        for arrays in zip(*[slices(a) for a in self._arrays.values()]):
            yield Feed(dict(zip(self._arrays, arrays)))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._arrays)

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        return iter(self._arrays.items())

    def arrays(self) -> list[np.ndarray]:
        return list(self._arrays.values())

    @property
    def first(self) -> np.ndarray:
        return next(iter(self._arrays.values()))

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays.values())

    # -- explicit changes -------------------------------------------------------------------
    def map(self, fn: Callable[[str, np.ndarray], np.ndarray]) -> "Feed":
        return Feed({n: fn(n, a) for n, a in self._arrays.items()})

    def contiguous(self) -> "Feed":
        """Every array C-contiguous; an array that reads its own batches (OnDisk) as it is: read whole, it would
        undo what it is for."""
        return self.map(lambda _, a: a if hasattr(a, "batches") else np.ascontiguousarray(a))

    def renamed(self, names: dict[str, str]) -> "Feed":
        return Feed({names.get(n, n): a for n, a in self._arrays.items()})

    def flat(self) -> np.ndarray:
        """Every array's values per sample, side by side as float32 (N, total): the form a row's outputs are
        stored in (deploytool.data.feed.OutputLayout splits them again)."""
        n = len(self)
        return np.concatenate([np.asarray(a, np.float32).reshape(n, -1) for a in self._arrays.values()], axis=1)


def as_feed(x: "Feed | np.ndarray") -> Feed:
    """Named inputs from what a caller of the library hands in (a test, the Python API, a notebook): a Feed as it
    is, one array as a single-array model's one input (IMPLIED_INPUT). The one place an array becomes a Feed;
    every stage past the entry points (Runtime.run, convert.convert, the measuring workers) takes Feeds only."""
    return x if isinstance(x, Feed) else Feed.one(IMPLIED_INPUT, x)


def save_samples(folder: Path, x: Feed) -> str:
    """A few samples saved for a maintainer's reproducer; returns the file's name: a model's one input as inputs.npy
    (the one array it is fed), several named inputs as inputs.npz (one array per input, by name)."""
    if len(x.names) == 1:
        np.save(folder / "inputs.npy", x.first)
        return "inputs.npy"
    np.savez(folder / "inputs.npz", **dict(x.items()))
    return "inputs.npz"


def pad_batch(x: Feed, size: int) -> Feed:
    """`x` padded with zero samples to `size` (a model exported at a fixed batch); its first len(x) are x's."""
    if len(x) >= size:
        return x
    return x.map(lambda _, a: np.concatenate([a, np.zeros((size - len(a), *a.shape[1:]), a.dtype)]))


def feed_sha256(x: "Feed | np.ndarray") -> str:
    """The content hash of a calibration or test set: one array's bytes as artifact.array_sha256 names them (so
    an image model's keys are what they always were), or every named array's name, dtype, shape and bytes."""
    if not isinstance(x, Feed):
        return array_sha256(x)
    h = hashlib.sha256()
    for name, a in x.items():
        h.update(f"{name}|{a.dtype}|{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# (name, one sample's shape) of each output, in order: how a stored (N, total) outputs array splits
OutputLayout = tuple[tuple[str, tuple[int, ...]], ...]


def layout_of(feed: Feed) -> OutputLayout:
    return tuple((n, tuple(int(d) for d in a.shape[1:])) for n, a in feed.items())


def split(flat: np.ndarray, layout: OutputLayout) -> Feed:
    """The named outputs of a stored (N, total) array."""
    flat = np.asarray(flat)
    n = len(flat)
    flat = flat.reshape(n, -1)
    out, at = {}, 0
    for name, shape in layout:
        size = int(np.prod(shape)) if shape else 1
        out[name] = flat[:, at:at + size].reshape((n, *shape))
        at += size
    if at != flat.shape[1]:
        raise ValueError(f"stored outputs have {flat.shape[1]} values per sample, the layout {at}")
    return Feed(out)


# Artifact.options key: outputs a converter made channels-last (onnx2tf: NC... -> N...C) of a channels-first source
CHANNELS_LAST_OUTPUTS = "channels_last_outputs"


def channels_last(source_shape: tuple[int | None, ...], file_shape: tuple[int | None, ...]) -> bool:
    """Whether a file's output (one sample's shape) is the source's channels-first output made channels-last:
    (C, d1, ..., dk) became (d1, ..., dk, C), k >= 1, and the two differ."""
    s, f = tuple(source_shape), tuple(file_shape)
    return len(s) >= 2 and len(f) == len(s) and s != f and f == (*s[1:], s[0])


def layout_unknown(source_shape: tuple[int | None, ...], file_shape: tuple[int | None, ...]) -> bool:
    """A source output whose channels-last form has its very shape (every dimension equal, as (16, 16, 16)):
    whether a converter moved its channels cannot be told from the shapes."""
    s, f = tuple(source_shape), tuple(file_shape)
    return len(s) >= 2 and s == f and None not in s and len(set(s)) == 1


def restore_channels_first(feed: Feed, names: list[str] | tuple[str, ...],
                           sample_shapes: dict[str, tuple[int, ...]]) -> Feed:
    """`feed` with each output of `names` — its values in a channels-last file's memory order, whatever shape a
    runtime gave them — laid out as the source's channels-first (C, d1, ..., dk) again: one rule for every
    runtime (host, browser, phone)."""
    def restore(name: str, a: np.ndarray) -> np.ndarray:
        s = sample_shapes.get(name)
        if name not in names or s is None or len(s) < 2 or int(np.prod(s)) != a[0].size:
            return a
        return np.ascontiguousarray(np.moveaxis(a.reshape(len(a), *s[1:], s[0]), -1, 1))

    return feed.map(restore)
