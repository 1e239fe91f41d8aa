"""Feed: named arrays sliced together, dtypes kept; and a row's outputs stored side by side and split again."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from deploytool.data.feed import Feed, layout_of, split


def _feed() -> Feed:
    return Feed({"input_ids": np.arange(12, dtype=np.int64).reshape(3, 4),
                 "mask": np.ones((3, 4), np.int32), "x": np.zeros((3, 2, 2), np.float32)})


def test_a_feed_slices_every_array_alike_and_keeps_dtypes():
    f = _feed()
    assert len(f) == 3 and f.names == ("input_ids", "mask", "x")
    two = f[1:3]
    assert isinstance(two, Feed) and len(two) == 2 and two["input_ids"].tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]
    picked = f[np.array([2, 0])]
    assert picked["input_ids"][0, 0] == 8 and picked["mask"].dtype == np.int32 and picked["x"].shape == (2, 2, 2)
    assert Feed.concat([f[:1], f[1:]]) == f
    with pytest.raises(ValueError, match="same number of samples"):
        Feed({"a": np.zeros(2), "b": np.zeros(3)})


def test_outputs_stored_side_by_side_split_back_to_their_names_and_shapes():
    out = Feed({"scores": np.arange(10, dtype=np.float32).reshape(2, 5), "value": np.array([[7.0], [8.0]])})
    flat = out.flat()
    assert flat.shape == (2, 6) and flat.dtype == np.float32 and flat[1].tolist() == [5, 6, 7, 8, 9, 8]
    back = split(flat, layout_of(out))
    assert back.names == ("scores", "value") and back["value"].tolist() == [[7.0], [8.0]]
    with pytest.raises(ValueError, match="6 values per sample, the layout 5"):
        split(flat, (("scores", (5,)),))


def test_batches_cut_every_array_at_the_same_samples_and_an_on_disk_array_reads_its_own():
    from deploytool.data.ondisk import OnDisk

    ids = np.arange(10, dtype=np.int64).reshape(10, 1)
    mask = -np.arange(10, dtype=np.int32)
    parts = list(Feed({"ids": ids, "mask": mask}).batches(4))
    assert [len(p) for p in parts] == [4, 4, 2] and all(p.names == ("ids", "mask") for p in parts)
    # each array's own samples, in order: not one array's slices under every name
    assert np.array_equal(np.concatenate([p["ids"] for p in parts]), ids)
    assert np.array_equal(np.concatenate([p["mask"] for p in parts]), mask) and parts[0]["mask"].dtype == np.int32
    with tempfile.TemporaryDirectory() as tmp:
        x = np.arange(30, dtype=np.float32).reshape(10, 3)
        disk = OnDisk.write(x, Path(tmp) / "x.npy")
        seen = [(p["x"].copy(), p["x"].__array_interface__["data"][0], p["ids"].copy())
                for p in Feed({"x": cast(np.ndarray, disk), "ids": ids}).batches(4)]
        assert np.array_equal(np.concatenate([s[0] for s in seen]), x)  # read from the file, batch by batch
        assert len({s[1] for s in seen}) == 1  # into one buffer, as the batched pass reads a large set
        assert np.array_equal(np.concatenate([s[2] for s in seen]), ids)
