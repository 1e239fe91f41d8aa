"""deploytool.data.ondisk: a large test set as a file, read a slice at a time — slices equal the array's, it pickles
as its path (not its bytes), reading it whole gives the array, and scratch folders of dead processes are swept."""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest

from deploytool.data import ondisk
from deploytool.data.ondisk import OnDisk


def test_slices_read_from_the_file_equal_the_arrays(tmp_path):
    x = np.random.default_rng(0).normal(size=(37, 5, 4, 3)).astype(np.float32)
    d = OnDisk.write(x, tmp_path / "x.npy")
    assert len(d) == 37 and d.shape == x.shape and d.dtype == np.float32 and d.nbytes == x.nbytes and d.ndim == 4
    for s in (slice(0, 1), slice(5, 13), slice(30, 99), slice(36, None), slice(None, 4), slice(40, 50)):
        assert np.array_equal(d[s], x[s]) and d[s].flags.c_contiguous
    assert np.array_equal(np.asarray(d), x) and np.array_equal(np.load(tmp_path / "x.npy"), x)  # a plain .npy
    assert len(pickle.dumps(d)) < 1000  # its path and shape cross to a worker, not its bytes
    assert np.array_equal(pickle.loads(pickle.dumps(d))[2:4], x[2:4])
    with pytest.raises(TypeError, match="contiguous slices"):
        d[::2]


def test_scratch_folders_of_dead_processes_are_swept(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"deploytool-testset-{2**22 + 12345}-abc"  # above pid_max's default: no such process
    dead.mkdir()
    mine = ondisk.scratch_dir()
    assert mine.parent == tmp_path and mine.name.startswith(f"deploytool-testset-{os.getpid()}-")
    assert not dead.exists()
    ondisk.remove_scratch(mine)
    assert not Path(mine).exists()


def test_the_batched_pass_reads_batches_into_one_buffer(tmp_path):
    from typing import cast

    from deploytool.data.feed import Feed
    from deploytool.runtimes.measure import run_batched

    x = np.random.default_rng(1).normal(size=(37, 6)).astype(np.float32)
    d = OnDisk.write(x, tmp_path / "x.npy")
    batches = list(b.copy() for b in d.batches(8))
    assert [len(b) for b in batches] == [8, 8, 8, 8, 5]
    assert np.array_equal(np.concatenate(batches), x)
    seen: list[np.ndarray] = []

    def predict(b: Feed) -> Feed:
        assert isinstance(b["x"], np.ndarray)
        seen.append(b["x"])
        return Feed.one("y", b["x"].sum(axis=1, keepdims=True) * 2)
    out, _ = run_batched(predict, Feed.one("x", cast(np.ndarray, d)), 8)  # the file stands in for its array
    assert np.allclose(out["y"][:, 0], x.sum(axis=1) * 2)  # every sample once, in order
    assert len({b.__array_interface__["data"][0] for b in seen}) == 1  # one buffer, not a fresh array per batch
    (tmp_path / "x.npy").write_bytes((tmp_path / "x.npy").read_bytes()[:-40])
    with pytest.raises(OSError, match="cut short"):
        list(d.batches(8))
