"""A weak test set is named (issue 38, part 4): a baseline that predicts one class for (nearly) every sample, or
whose outputs barely vary, makes agreement say nothing; such a row is judged on output error and cosine. The rule's
numbers are pinned here by hand-made scores, and the judge is shown to tell a broken target from a faithful one
where agreement could not."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.report.tasks import COS_MIN, weak_set_warnings, view_of
from tests.scores import compare
from deploytool.tasks.weak_set import (MIN_SAMPLES, ONE_CLASS_SHARE, SPREAD_FLOOR, agreement_uninformative,
                                     spread_across_samples)
from deploytool.tasks import TASKS
from deploytool.tasks.weak_set import weak_set_tolerances
from deploytool.tolerances import DEFAULT_TOLERANCES

RNG = np.random.default_rng(0)


def _one_hot_scores(classes: list[int], n_classes: int = 10, noise: float = 0.1) -> np.ndarray:
    """Scores whose top-1 is `classes[i]` for sample i, varying a lot from sample to sample."""
    x = RNG.normal(0.0, noise, (len(classes), n_classes))
    x[np.arange(len(classes)), classes] = x.max(1) + 3.0
    return x.astype(np.float32)


def test_the_one_class_share_is_the_lowest_agreement_fail_limit():
    """From this share on, a target answering the baseline's one class for every input cannot fail on agreement."""
    assert ONE_CLASS_SHARE == min(t["agreement"][1] for t in DEFAULT_TOLERANCES.values()) == 0.95


def test_a_baseline_of_one_class_is_named_with_its_class_and_share():
    why = agreement_uninformative(_one_hot_scores([3] * 40))
    assert "predicts class 3 for 40 of 40 test samples (100%" in why


@pytest.mark.parametrize("same,n,weak", [(38, 40, True), (37, 40, False), (MIN_SAMPLES, MIN_SAMPLES, True),
                                         (MIN_SAMPLES - 1, MIN_SAMPLES - 1, False)])
def test_the_rule_fires_from_95_percent_of_20_samples_or_more(same, n, weak):
    classes = [3] * same + [i % 3 for i in range(n - same)]  # the others spread over classes 0-2
    assert bool(agreement_uninformative(_one_hot_scores(classes))) is weak


def test_a_trained_classifiers_spread_set_is_informative():
    assert agreement_uninformative(_one_hot_scores([i % 10 for i in range(64)])) == ""


def test_outputs_that_barely_vary_are_named_even_when_their_top_class_varies():
    """Near-uniform probabilities (a random-weight model's softmax): the top class moves with noise of 0.1%."""
    x = np.full((50, 10), 0.1) + RNG.normal(0.0, 1e-4, (50, 10))
    assert len(set(x.argmax(1))) > 5 and spread_across_samples(x) < SPREAD_FLOOR
    assert "differ across the 50 test samples by" in agreement_uninformative(x)


def test_the_spread_is_hand_computed():
    # mean (1, 1); each sample 1 away in norm: sqrt(1) / sqrt(mean(|x|^2)) = 1 / sqrt((1 + 5) / 2... by hand:
    x = np.array([[1.0, 0.0], [1.0, 2.0]])  # mean (1, 1); |x - mean|^2 = 1, 1; |x|^2 = 1, 5
    assert spread_across_samples(x) == pytest.approx(1.0 / np.sqrt(3.0))
    assert spread_across_samples(np.ones((4, 3))) == 0.0 and spread_across_samples(np.zeros((4, 3))) == 0.0
    assert np.isnan(spread_across_samples(np.array([[np.nan, 1.0]])))


def test_weak_set_tolerances_drop_the_agreement_family_and_keep_the_rows_own_limits():
    row = {"agreement": (0.98, 0.95), "accuracy_drop_points": (1.0, 3.0), "max_abs_error": (1e-4, 1e-2)}
    assert weak_set_tolerances(row, quantized=True) == {
        "max_abs_error": (1e-4, 1e-2), "cosine_min": TASKS["raw"].tolerances["quantized"]["cosine_min"],
        "rel_error": TASKS["raw"].tolerances["quantized"]["rel_error"]}
    own = weak_set_tolerances({**row, "cosine_min": (0.5, 0.4)}, quantized=False)
    assert own["cosine_min"] == (0.5, 0.4) and own["rel_error"] == TASKS["raw"].tolerances["none"]["rel_error"]


def test_on_a_weak_set_a_target_that_ignores_its_input_fails_where_agreement_would_pass_it():
    """The baseline says class 3 for every sample; a broken target answers the baseline's mean output whatever it
    is given. Agreement is 100% (it would pass), but the cosine shows the target lost every sample's own output."""
    base = _one_hot_scores([3] * 40, noise=1.0)
    broken = np.repeat(base.mean(0, keepdims=True), 40, axis=0)
    limits = DEFAULT_TOLERANCES["quantized"]
    y = np.array([i % 10 for i in range(40)])
    c = compare(broken, base, y, limits, quantized=True)
    assert c.agreement == 1.0 and "predicts class 3" in c.agreement_uninformative
    assert {ch.metric for ch in c.checks} == {"cosine_min", "rel_error"}
    assert c.verdict == "fail" and c.cosine_min is not None and c.cosine_min < 0.95


def test_on_a_weak_set_a_faithful_target_passes_on_error_and_cosine():
    base = _one_hot_scores([3] * 40, noise=1.0)
    c = compare(base + np.float32(1e-3), base, np.zeros(40, np.int64), DEFAULT_TOLERANCES["quantized"], quantized=True)
    assert c.agreement_uninformative and c.verdict == "pass"
    assert {ch.metric for ch in c.checks} == {"cosine_min", "rel_error"}


def test_an_informative_set_is_judged_as_before():
    base = _one_hot_scores([i % 10 for i in range(40)])
    c = compare(base, base, np.arange(40) % 10, DEFAULT_TOLERANCES["quantized"], quantized=True)
    assert c.agreement_uninformative == "" and {ch.metric for ch in c.checks} == {"agreement", "accuracy_drop_points"}


def test_the_rule_is_a_classifiers_only():
    base = _one_hot_scores([3] * 40)
    assert compare(base, base, np.zeros(40, np.int64), {}, task="raw").agreement_uninformative == ""


def test_the_report_names_a_weak_set_once_and_reads_its_rows_by_cosine(tmp_path):
    """Rows judged by the real compare on a one-class baseline, the page and summary.md written by write_report."""
    from deploytool.report import summary_rows, write_report
    from tests.unit.test_task_views import _run

    scores = _one_hot_scores([2] * 48, n_classes=4, noise=1.0)
    inp = _run("classification", {"scores": scores}, np.arange(48) % 4, ["a", "b", "c", "d"])
    rows = summary_rows(inp)
    assert all(r.agreement_uninformative for r in rows)
    (line,) = weak_set_warnings(rows)
    assert line.startswith("weak: the PC baseline predicts class 2 for 48 of 48") and "cosine" in line
    view = view_of(rows)
    assert view.headline == COS_MIN and COS_MIN in view.columns and COS_MIN in view.brief
    paths = write_report(inp, tmp_path)
    md, html = paths.markdown.read_text(encoding="utf-8"), paths.html.read_text(encoding="utf-8")
    assert "test set: weak: the PC baseline predicts class 2" in md and "| cos min |" in md
    assert "weak: the PC baseline predicts class 2" in html


def test_a_report_of_an_informative_set_says_nothing_of_it():
    from deploytool.report import summary_rows
    from tests.unit.test_task_views import classifier

    rows = summary_rows(classifier())
    assert weak_set_warnings(rows) == [] and view_of(rows).headline != COS_MIN
