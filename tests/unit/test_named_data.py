"""A user's test set for a model with a signature: one array per input by name (or `x` for one input), dtypes
kept, optional labels deciding the task, and one line naming the input, what the model expects and the fix for
every array that cannot feed it."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.data.named import load_feeds
from deploytool.errors import DataError, ShapeError
from deploytool.modelfiles.signature import Signature, spec_of
from deploytool.spec import Preprocess

TEXT = Signature((spec_of("input_ids", "int64", [None, 6]), spec_of("attention_mask", "int64", [None, 6])),
                 (spec_of("logits", "float32", [None, 3], kind=""),))
SEQ = Signature((spec_of("x", "float32", [None, None, 4]),), (spec_of("y", "float32", [None, 2], kind=""),))


def _npz(tmp_path, **arrays):
    path = tmp_path / "t.npz"
    np.savez(path, **arrays)
    return path


def test_token_ids_keep_their_dtype_and_are_never_scaled(tmp_path):
    ids = np.arange(12, dtype=np.int64).reshape(2, 6)
    path = _npz(tmp_path, input_ids=ids, attention_mask=np.ones((2, 6), np.int32), y=np.array([0, 2]))
    feed, y, train, _ = load_feeds(path, TEXT, Preprocess(scale=0.5, mean=(1.0,), std=(2.0,)))
    assert feed["input_ids"].dtype == np.int64 and np.array_equal(feed["input_ids"], ids)
    assert feed["attention_mask"].dtype == np.int64  # the model's type, not the file's
    assert y.dtype == np.int64 and train is None


def test_one_input_may_be_called_x_and_float_labels_mean_regression(tmp_path):
    x = np.random.default_rng(0).normal(size=(5, 7, 4)).astype(np.float64)
    feed, y, _, _ = load_feeds(_npz(tmp_path, x=x, y=np.linspace(0, 1, 5)), SEQ, Preprocess())
    assert feed.names == ("x",) and feed["x"].dtype == np.float32 and feed["x"].shape == (5, 7, 4)
    assert y.dtype == np.float32  # regression targets


@pytest.mark.parametrize("arrays, error, words", [
    ({"input_id": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64)}, DataError,
     "no array for input input_ids: int64 [N, 6] (tokens) (is 'input_id' meant for it?)"),
    ({"input_ids": np.zeros((2, 6), np.float32), "attention_mask": np.zeros((2, 6), np.int64)}, DataError,
     "holds float32 but the model takes int64"),
    ({"input_ids": np.zeros((2, 5), np.int64), "attention_mask": np.zeros((2, 5), np.int64)}, ShapeError,
     "has 5 in dimension 1, the model takes 6"),
    ({"input_ids": np.zeros((2, 6, 1), np.int64), "attention_mask": np.zeros((2, 6), np.int64)}, ShapeError,
     "3-D; the model takes 2-D samples"),
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((3, 6), np.int64)}, ShapeError,
     "different numbers of samples"),
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64),
      "y": np.zeros(3, np.int64)}, ShapeError, "2 samples but 3 labels"),
    # hostile inputs, round 4
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64),
      "labels": np.zeros(2, np.int64)}, DataError, "array 'labels' (did you mean 'y'?) is none of the model's inputs"),
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64),
      "y": np.array([0, -1])}, DataError, "labels are 0..classes-1"),
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64),
      "y": np.array([0.5, 1e300])}, DataError, "values beyond float32"),
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64),
      "y": np.array([1, 2**64 - 1], np.uint64)}, DataError, "class indices 1..18446744073709551615"),
    ({"input_ids": np.zeros((2, 6), np.int64), "attention_mask": np.zeros((2, 6), np.int64),
      "input_ids_train": np.zeros((4, 6), np.int64), "attention_mask_train": np.zeros((3, 6), np.int64)},
     ShapeError, "calibration arrays hold different numbers of samples"),
])
def test_an_array_that_cannot_feed_its_input_is_one_line_naming_it(tmp_path, arrays, error, words):
    with pytest.raises(error) as e:
        load_feeds(_npz(tmp_path, **arrays), TEXT, Preprocess())
    assert words in str(e.value) and "\n" not in str(e.value)


def test_ragged_and_non_finite_arrays_are_refused(tmp_path):
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = [1, 2], [3]
    path = tmp_path / "r.npz"
    np.savez(path, input_ids=ragged, attention_mask=np.zeros((2, 6), np.int64))
    with pytest.raises(DataError, match="ragged rows"):
        load_feeds(path, TEXT, Preprocess())
    x = np.zeros((3, 2, 4), np.float32)
    x[1, 0, 0] = np.nan
    with pytest.raises(DataError, match=r"1 sample\(s\) contain NaN or infinity \(first: \[1\]\)"):
        load_feeds(_npz(tmp_path, x=x), SEQ, Preprocess())


def test_float64_inputs_beyond_float32_are_refused_in_test_and_calibration_splits(tmp_path):
    x = np.ones((3, 5, 4))
    for bad in ({"x": x * 1e300}, {"x": x, "x_train": x * 1e300}):
        with pytest.raises(DataError, match="not finite as float32"):
            load_feeds(_npz(tmp_path, **bad), SEQ, Preprocess())


def test_an_input_named_y_is_refused_and_a_single_inputs_x_wins_over_its_own_name(tmp_path):
    takes_y = Signature((spec_of("y", "float32", [None, 4]),), (spec_of("out", "float32", [None, 2], kind=""),))
    with pytest.raises(DataError, match="input named 'y'"):
        load_feeds(_npz(tmp_path, y=np.ones((2, 4), np.float32)), takes_y, Preprocess())
    feed, labels, _, _ = load_feeds(_npz(tmp_path, x=np.ones((2, 4), np.float32), y=np.array([0, 1])), takes_y,
                                    Preprocess())  # its samples as x: no doubt which array holds the labels
    assert feed.names == ("y",) and labels.tolist() == [0, 1]
    named_x_train = Signature((spec_of("x_train", "float32", [None, 4]),), (spec_of("o", "float32", [None, 2], kind=""),))
    x, cal = np.zeros((2, 4), np.float32), np.ones((5, 4), np.float32)
    feed, _, train, _ = load_feeds(_npz(tmp_path, x=x, x_train=cal), named_x_train, Preprocess())
    assert np.array_equal(feed["x_train"], x) and train is not None and np.array_equal(train["x_train"], cal)
