"""Tasks are registered strategies (deploytool.tasks): inference asks them in order, a task's own metrics join the
tolerance vocabulary, and the one-module task of tests/segmentation_task.py computes what it says."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool import tasks
from deploytool.errors import UnknownOption
from deploytool.run.compare import compare_outputs
from deploytool.tasks import TASKS, Task, infer_task, register_task
from deploytool.tolerances import TOLERANCE_METRICS


@pytest.fixture
def segmentation():
    """tests/segmentation_task.py registered for the test, and forgotten after it (metrics included)."""
    metrics = dict(TOLERANCE_METRICS)
    import importlib

    import tests.segmentation_task as module

    importlib.reload(module)  # registers it (again, if another test imported it)
    yield module
    TASKS.unregister(module.NAME)
    TOLERANCE_METRICS.clear()
    TOLERANCE_METRICS.update(metrics)


@pytest.mark.parametrize("y, shape, task", [
    (np.array([0, 1]), (10,), "classification"), (np.array([0.5, 1.0], np.float32), (1,), "regression"),
    (None, (10,), "classification"), (None, (1,), "raw"), (None, (4, 4, 3), "raw"), (np.zeros(0), (5,), "classification"),
])
def test_inference_asks_the_tasks_in_their_order(y, shape, task):
    assert infer_task(y, shape) == task


def test_a_task_of_its_own_is_offered_but_never_inferred(segmentation):
    assert segmentation.NAME in tasks.names() and TOLERANCE_METRICS["pixel_agreement"] == "min"
    assert infer_task(np.zeros((2, 4, 4), np.int64), (4, 4, 3)) == "classification"  # raw and the rest come first


def test_a_metric_of_another_direction_or_a_tolerance_on_nothing_is_refused():
    class Bad(Task):
        name = "bad"
        metrics = {"agreement": "max"}

    with pytest.raises(UnknownOption, match="already a min metric"):
        register_task(Bad())

    class Vague(Task):
        name = "vague"
        tolerances = {"none": {"sharpness": (1.0, 2.0)}}

    with pytest.raises(UnknownOption, match="a tolerance on 'sharpness', which no task measures"):
        register_task(Vague())
    assert "bad" not in TASKS and "vague" not in TASKS
    with pytest.raises(UnknownOption, match="unknown task 'vague'; tasks are classification, regression, raw"):
        tasks.get_task("vague")


def test_mean_iou_by_hand(segmentation):
    pred = np.array([[0, 0], [1, 2]])
    labels = np.array([[0, 1], [1, 2]])
    # class 0: 1/2, class 1: 1/2, class 2: 1/1
    assert segmentation.mean_iou(pred, labels, 3) == pytest.approx((0.5 + 0.5 + 1.0) / 3)


def test_the_judge_checks_a_task_of_its_owns_metrics(segmentation):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(4, 2, 2, 3)).astype(np.float32)
    y = base.argmax(-1)
    moved = base.copy()
    moved[0, 0, 0] = moved[0, 0, 0][::-1] * 10  # one pixel of 16 changes class
    tol = segmentation.Segmentation.tolerances["none"]
    same = compare_outputs({"mask": base}, {"mask": base}, y, tol, task=segmentation.NAME)
    assert same.verdict == "pass" and same.task_metrics["pixel_agreement"] == 1.0
    off = compare_outputs({"mask": moved}, {"mask": base}, y, tol, task=segmentation.NAME)
    assert off.task_metrics["pixel_agreement"] == pytest.approx(15 / 16)
    assert off.verdict == "fail" and {c.metric for c in off.broken} >= {"pixel_agreement"}
    unlabelled = compare_outputs({"mask": moved}, {"mask": base}, None, tol, task=segmentation.NAME)
    assert {c.metric for c in unlabelled.checks} == {"pixel_agreement"}  # mIoU needs labels: not checked


def test_a_users_classifier_is_judged_on_float_routes_by_its_error_over_the_range_and_the_zoo_keeps_its_limits():
    """Logits in the tens differ by float32 rounding alone by ~3e-4: a user's classifier (no manifest) passes on the
    error over each output's range; the absolute limit the zoo's manifests write would call it degraded."""
    from deploytool.spec import load_spec
    from deploytool.tolerances import DEFAULT_TOLERANCES, USER_CLASSIFIER_TOLERANCES

    rng = np.random.default_rng(1)
    base = (rng.normal(size=(32, 10)) * 20).astype(np.float32)
    target = base + np.asarray(rng.uniform(-3e-4, 3e-4, size=base.shape), dtype=np.float32)
    y = base.argmax(1)
    user = compare_outputs({"logits": target}, {"logits": base}, y, USER_CLASSIFIER_TOLERANCES["none"],
                           task="classification")
    assert user.verdict == "pass" and {c.metric for c in user.checks} >= {"rel_error", "agreement"}
    absolute = compare_outputs({"logits": target}, {"logits": base}, y, DEFAULT_TOLERANCES["none"],
                               task="classification")
    assert absolute.verdict == "degraded" and [c.metric for c in absolute.broken] == ["max_abs_error"]
    off = compare_outputs({"logits": base * 1.05}, {"logits": base}, y, USER_CLASSIFIER_TOLERANCES["none"],
                          task="classification")
    assert off.verdict == "fail" and "rel_error" in {c.metric for c in off.broken}  # 5% of the range: wrong
    assert tasks.get_task("classification").tolerances is USER_CLASSIFIER_TOLERANCES
    zoo = load_spec("lenet5").tolerances["none"]
    assert zoo["max_abs_error"] == (1e-4, 1e-2) and "rel_error" not in zoo
