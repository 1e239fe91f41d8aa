"""The rules that let any model through, pinned: outputs of any structure flatten by name the same way
everywhere; the scored output is the per-class float scores beside an integer label (or the one named); a
quantized integer tensor takes floats; a channels-last output of a channels-first source is laid out back the
same way whatever shape a runtime gave it; a ZipMap's maps become per-class scores in class order. (Each
task's report view: test_task_views.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.data.feed import Feed, channels_last, restore_channels_first
from deploytool.errors import DataError, StageFailed
from deploytool.modelfiles.signature import Signature, TensorSpec, flatten_outputs, output_spec, spec_of
from deploytool.run.compare import compare_outputs
from deploytool.run.context import check_labels_fit
from deploytool.runtimes.onnxrt import as_array


def test_outputs_of_any_structure_flatten_by_name():
    a, b, c = np.zeros(1), np.ones(1), np.full(1, 2.0)
    assert flatten_outputs({"score": b, "kind": a}, ["kind", "score"]) == [a, b]  # a dict: by its keys
    assert flatten_outputs([a, b], ["x", "y"]) == [a, b]  # a sequence: by position
    assert flatten_outputs({"h": {"kind": a, "score": b}, "c": c}, ["h.kind", "h.score", "c"]) == [a, b, c]
    assert flatten_outputs(a, ["only"]) == [a]


def test_the_scored_output_is_the_per_class_scores_or_the_one_named():
    label = TensorSpec("label", "int64", (None,))
    probs = TensorSpec("probabilities", "float32", (None, 10))
    sig = Signature((TensorSpec("X", "float32", (None, 64), "features"),), (label, probs))
    assert sig.scored_output() is probs and sig.scored_output("label") is label
    assert sig.integer_outputs == ("label",)
    with pytest.raises(KeyError):
        sig.scored_output("nope")
    one = Signature(sig.inputs, (TensorSpec("value", "float32", (None, 1)),))
    assert one.scored_output().name == "value"  # no scores: the first


def test_accuracy_comes_from_the_scored_output_and_a_label_output_is_compared_for_equality():
    y = np.array([0, 1, 2, 1])
    probs = np.eye(3, dtype=np.float32)[[0, 1, 2, 2]]
    labels = probs.argmax(1).astype(np.float32)
    base = {"label": labels, "probabilities": probs}
    target = {"label": np.array([0, 1, 2, 0], np.float32), "probabilities": probs}
    c = compare_outputs(target, base, y, {"agreement": (1.0, 0.9)}, task="classification", scored="probabilities",
                        integer_outputs=("label",))
    assert c.accuracy == 0.75 and c.agreement == 1.0 and c.scored_output == "probabilities"
    assert c.label_agreement == 0.75 and {o.name: o.exact_match for o in c.outputs}["label"] == 0.75
    assert {ch.metric: ch.outcome for ch in c.checks} == {"agreement": "pass", "label_agreement": "fail"}


def test_a_quantized_integer_tensor_takes_floats_and_an_integer_one_without_a_scale_takes_integers():
    q = spec_of("image", "int8", [None, 8, 8, 1], quantization=(0.0039, -128))
    assert q.is_float and q.kind == "image" and q.quantization == (0.0039, -128)
    assert "quantized: scale 0.0039, zero point -128" in q.describe()
    ids = spec_of("ids", "int8", [None, 12], quantization=(0.0, 0))
    assert not ids.is_float and ids.kind == "tokens" and ids.quantization is None
    assert TensorSpec.from_json(q.to_json()) == q


@pytest.mark.parametrize("source", [(2, 16, 16), (6, 50)])  # NCHW per-pixel, NCW per-step
def test_a_channels_last_output_is_laid_out_channels_first_whatever_shape_a_runtime_gave_it(source):
    rng = np.random.default_rng(0)
    want = rng.normal(size=(3, *source)).astype(np.float32)
    moved = np.moveaxis(want, 1, -1)  # what the file computes: channels last
    file_shape = tuple(moved.shape[1:])
    assert channels_last(source, file_shape) and not channels_last(source, source)
    for given in (moved, moved.reshape(3, *source), moved.reshape(3, -1)):  # host, a browser's reshape, flat
        got = restore_channels_first(Feed({"mask": given}), ["mask"], {"mask": source})["mask"]
        assert got.shape == want.shape and np.array_equal(got, want)
    untouched = restore_channels_first(Feed({"other": moved}), ["mask"], {"other": source})["other"]
    assert untouched is moved or np.array_equal(untouched, moved)


def test_a_zipmap_becomes_per_class_scores_in_class_order_and_other_sequences_are_refused():
    got = as_array("output_probability", [{1: 0.2, 0: 0.8}, {0: 0.1, 1: 0.9}])
    assert got.dtype == np.float32 and np.allclose(got, [[0.8, 0.2], [0.1, 0.9]])
    with pytest.raises(StageFailed, match="output 'seq' is a sequence"):
        as_array("seq", [np.zeros(2), np.zeros(2)])


@pytest.mark.parametrize("task, y, shape, words", [
    ("classification", np.array([0.5, 1.5], np.float32), (10,), "y holds floats"),
    ("classification", np.array([0, 1]), (1,), "1 value per sample"),
    ("classification", np.array([0, 1]), (), "1 value per sample"),
    ("classification", np.zeros((2, 3), np.int64), (10,), "one class index per sample (N,)"),
    ("regression", np.zeros((2, 3), np.float32), (10,), "hold 3 value(s) per sample, the scored output 10"),
])
def test_labels_that_cannot_mean_the_task_are_one_line(task, y, shape, words):
    with pytest.raises(DataError) as e:
        check_labels_fit(task, y, shape, "t.npz")
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("task, y, shape", [
    ("classification", np.array([0, 1]), (10,)), ("classification", np.zeros(0, np.int64), (0,)),
    ("regression", np.zeros((2, 3), np.float32), (3,)), ("regression", np.zeros(2, np.float32), (1,)),
    ("raw", np.zeros(0, np.int64), (7,)),
])
def test_labels_that_fit_their_task_pass(task, y, shape):
    check_labels_fit(task, y, shape, "t.npz")


@pytest.mark.parametrize("inputs, outputs, expected", [
    ([("image", "float32", (None, 28, 28, 1))], [("scores", "float32", (None, 10))], True),
    ([("image", "float32", (None, 3, 32, 32))], [("scores", "float32", (None, 10))], True),  # NCHW too
    ([("image", "float32", (None, None, None, 3))], [("scores", "float32", (None, 10))], False),  # open size
    ([("image", "float32", (None, 16, 16, 3))], [("mask", "float32", (None, 16, 16, 3))], False),  # per pixel
    ([("image", "float32", (None, 16, 16, 3))], [("value", "float32", (None, 1))], False),  # one value
    ([("ids", "int64", (None, 1, 12, 1))], [("scores", "float32", (None, 3))], False),  # not float
    ([("a", "float32", (None, 8, 8, 1)), ("b", "float32", (None, 8, 8, 1))], [("s", "float32", (None, 2))], False),
])
def test_an_image_classifier_is_decided_in_one_place(inputs, outputs, expected):
    sig = Signature(tuple(spec_of(*i) for i in inputs), tuple(output_spec(*o) for o in outputs))
    assert sig.image_classifier is expected
