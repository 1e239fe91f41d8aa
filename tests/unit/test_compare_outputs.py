"""The metrics of issue 24, pinned by hand-computed cases: per-sample cosine similarity, range-relative error,
top-5 agreement, MAE/RMSE and their increase, the task inferred from labels and outputs, and which checks a
row of each task gets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deploytool.run.compare import compare_outputs, cosine_per_sample, output_comparison
from tests.scores import compare
from deploytool.tasks import infer_task
from deploytool.tasks.classification import top_k_agreement
from deploytool.tasks.regression import regression_errors


def test_cosine_per_sample_by_hand():
    t = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [3.0, 4.0]])
    r = np.array([[0.0, 1.0], [2.0, 2.0], [0.0, 0.0], [1.0, 0.0], [-3.0, -4.0]])
    # orthogonal 0; parallel 1; both zero agree 1; zero against non-zero 0; opposite -1
    assert cosine_per_sample(t, r) == pytest.approx([0.0, 1.0, 1.0, 0.0, -1.0])
    assert cosine_per_sample(np.array([[1.0, 2.0]]), np.array([[2.0, 1.0]]))[0] == pytest.approx(4 / 5)


def test_an_output_comparison_by_hand():
    ref = np.array([[2.0, -4.0], [1.0, 0.0]])
    out = np.array([[2.5, -4.0], [1.0, 0.0]])
    o = output_comparison("y", out, ref)
    assert o.max_abs_error == pytest.approx(0.5) and o.mean_abs_error == pytest.approx(0.125)
    assert o.rel_error == pytest.approx(0.5 / 4.0)  # over the output's range: its largest |baseline value|
    cos0 = (2.5 * 2 + 16) / (math.hypot(2.5, 4) * math.hypot(2, 4))
    assert o.cosine_min == pytest.approx(cos0) and o.cosine_mean == pytest.approx((cos0 + 1) / 2)
    assert o.shape == (2,)
    nan = output_comparison("y", np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]))
    assert math.isinf(nan.max_abs_error) and math.isnan(nan.cosine_min)


def test_top5_agreement_by_hand():
    ref = np.zeros((2, 10))
    ref[0, 3] = ref[1, 9] = 1.0  # baseline's top-1: 3 and 9
    out = np.tile(np.arange(10.0), (2, 1))  # target's top-5: 5..9
    assert top_k_agreement(out, ref, 5) == pytest.approx(0.5)
    assert top_k_agreement(out, ref, 7) == pytest.approx(1.0)  # 3..9


def test_mae_and_rmse_by_hand():
    mae, rmse = regression_errors(np.array([1.0, 2.0, 5.0]), np.array([1.0, 4.0, 2.0]))
    assert mae == pytest.approx(5 / 3) and rmse == pytest.approx(math.sqrt(13 / 3))


@pytest.mark.parametrize("y, shape, task", [
    (np.array([1, 0, 2]), (3,), "classification"), (np.array([0.5, 1.5]), (1,), "regression"),
    (None, (10,), "classification"), (None, (1,), "raw"), (None, (4, 8), "raw"),
])
def test_the_task_is_inferred_from_labels_and_outputs(y, shape, task):
    assert infer_task(y, shape) == task


def test_a_regression_row_is_judged_on_its_rmse_increase():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    base = {"price": np.array([[1.0], [2.0], [3.0], [5.0]])}  # RMSE 0.5, MAE 0.25
    worse = {"price": np.array([[1.0], [2.0], [3.0], [6.0]])}  # RMSE 1.0, MAE 0.5
    c = compare_outputs(worse, base, y, {"rmse_increase": (0.05, 0.5), "mae_increase": (0.05, 2.0)},
                        task="regression")
    assert c.task == "regression" and c.rmse == pytest.approx(1.0) and c.baseline_rmse == pytest.approx(0.5)
    assert c.rmse_increase == pytest.approx(1.0) and c.mae_increase == pytest.approx(1.0)
    assert {ch.metric: ch.outcome for ch in c.checks} == {"rmse_increase": "fail", "mae_increase": "degraded"}
    assert c.verdict == "fail" and math.isnan(c.accuracy) and c.flipped == []


def test_every_output_is_compared_and_the_worst_is_judged():
    base = {"a": np.ones((3, 2)), "b": np.array([[1.0, 0.0]] * 3)}
    out = {"a": np.ones((3, 2)), "b": np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])}
    c = compare_outputs(out, base, None, {"cosine_min": (0.999, 0.9)}, task="raw")
    assert [o.name for o in c.outputs] == ["a", "b"] and c.outputs[0].cosine_min == pytest.approx(1.0)
    assert c.cosine_min == pytest.approx(0.0) and c.max_abs_error == pytest.approx(1.0) and c.verdict == "fail"
    with pytest.raises(ValueError, match="no output 'b'"):
        compare_outputs({"a": out["a"]}, base, None, {}, task="raw")


def test_a_classifier_without_labels_is_judged_on_agreement_not_accuracy():
    base = np.eye(4)[[0, 1, 2, 3]]
    out = np.eye(4)[[0, 1, 2, 0]]
    c = compare_outputs({"logits": out}, {"logits": base}, None,
                        {"accuracy_drop_points": (0.0, 0.5), "agreement": (1.0, 0.5)}, task="classification")
    assert math.isnan(c.accuracy) and c.agreement == pytest.approx(0.75)
    assert [ch.metric for ch in c.checks] == ["agreement"] and c.verdict == "degraded"
    assert c.flipped[0].index == 3 and c.flipped[0].true_label == -1


def test_the_image_path_keeps_its_comparison_and_adds_the_new_figures():
    y = np.array([0, 1, 1])
    base = np.array([[2.0, 1.0], [0.0, 3.0], [0.0, 1.0]])
    out = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    c = compare(out, base, y, {"accuracy_drop_points": (0.0, 50.0), "agreement": (1.0, 0.5)})
    assert c.accuracy == pytest.approx(2 / 3) and c.baseline_accuracy == pytest.approx(1.0)
    assert c.agreement == pytest.approx(2 / 3) and [f.index for f in c.flipped] == [2]
    assert c.top5_agreement is None and c.outputs[0].name == "output" and c.cosine_min == pytest.approx(0.0)
    assert [ch.outcome for ch in c.checks] == ["degraded", "degraded"]


def test_a_comparison_with_outputs_and_regression_figures_survives_the_json_boundary():
    import json

    from deploytool.result import comparison_from_json

    c = compare_outputs({"p": np.array([[1.0], [3.0]])}, {"p": np.array([[1.5], [2.5]])}, np.array([1.0, 2.0]),
                        {"rmse_increase": (0.1, 0.2)}, task="regression")
    back = comparison_from_json(json.loads(json.dumps(c.to_json())))
    assert back is not None
    assert json.dumps(back.to_json()) == json.dumps(c.to_json())  # NaN accuracy included
    assert back.outputs[0].shape == (1,) and back.task == "regression" and back.rmse_increase == c.rmse_increase


def test_a_one_value_output_has_the_cosine_of_its_whole_column():
    o = output_comparison("v", np.array([[1.0], [0.0], [-2.0]]), np.array([[1.0], [0.5], [-2.0]]))
    whole = (1 + 4) / (math.sqrt(5) * math.sqrt(5.25))
    assert o.cosine_min == pytest.approx(whole) and o.cosine_mean == pytest.approx(whole)
