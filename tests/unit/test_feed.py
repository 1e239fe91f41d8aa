"""Feed: named arrays sliced together, dtypes kept; and a row's outputs stored side by side and split again."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from deploytool.artifact import IMPLIED_INPUT, Artifact
from deploytool.data.feed import Feed, as_feed, layout_of, save_samples, split
from deploytool.data.ondisk import OnDisk
from deploytool.runtimes import isolated


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


def test_an_array_handed_in_becomes_the_one_input_of_a_single_array_model_and_a_feed_stays_itself():

    x = np.zeros((2, 4, 4, 1), np.float32)
    fed = as_feed(x)
    assert fed.names == (IMPLIED_INPUT,) and fed.first is x  # named, not copied
    f = _feed()
    assert as_feed(f) is f
    # the name a single-array model's implied signature gives its one input: what runtimes bind the array by
    art = Artifact(path=Path("m.onnx"), format="onnx", framework="keras", layout="NHWC", input_shape=(4, 4, 1),
                   num_outputs=3)
    assert art.signature.input_names == (IMPLIED_INPUT,)


def test_contiguous_leaves_an_on_disk_array_unread(tmp_path):

    disk = OnDisk.write(np.arange(12, dtype=np.float32).reshape(4, 3), tmp_path / "x.npy")
    strided = np.arange(16, dtype=np.int64).reshape(4, 4)[:, ::2]
    out = Feed({"x": cast(np.ndarray, disk), "ids": strided}).contiguous()
    assert out["x"] is disk  # read whole, it would undo what it is for
    assert out["ids"].flags.c_contiguous and np.array_equal(out["ids"], strided)


def test_samples_for_a_maintainer_are_one_array_or_named_arrays(tmp_path):

    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    (tmp_path / "one").mkdir()
    assert save_samples(tmp_path / "one", Feed.one("input", x)) == "inputs.npy"
    assert np.array_equal(np.load(tmp_path / "one" / "inputs.npy"), x)
    (tmp_path / "named").mkdir()
    assert save_samples(tmp_path / "named", _feed()) == "inputs.npz"
    with np.load(tmp_path / "named" / "inputs.npz") as z:
        assert z.files == ["input_ids", "mask", "x"] and z["mask"].dtype == np.int32


def test_a_workers_large_arrays_go_as_files_written_once_named_inputs_too(monkeypatch):

    monkeypatch.setattr(isolated, "STREAM_BYTES", 1000)
    ids = np.arange(400, dtype=np.int64).reshape(100, 4)  # 3,200 bytes: past the limit
    mask = np.ones((100, 4), np.int8)  # 400 bytes: sent as it is
    workers = isolated.RuntimeWorkers()
    try:
        sent = workers.sendable(Feed({"ids": ids, "mask": mask}))
        assert isinstance(sent["ids"], OnDisk) and sent["ids"].dtype == np.int64  # its own dtype, not float32
        assert np.array_equal(sent["ids"][0:100], ids) and sent["mask"] is mask
        again = workers.sendable(Feed({"ids": ids, "mask": mask}))
        assert again["ids"] is sent["ids"]  # the same array: the same file, written once for every row
        assert isinstance(workers.sendable(np.zeros((100, 10), np.float32)).first, OnDisk)  # an array handed in
    finally:
        workers.close()
