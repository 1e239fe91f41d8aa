import numpy as np
import pytest

from deploytool.result import primary_memory
from deploytool.run.compare import Costs, judge, parse_tolerance_overrides
from tests.scores import compare
from deploytool.errors import UnknownOption

TOL = {"accuracy_drop_points": (1.0, 3.0), "agreement": (0.98, 0.95), "max_abs_error": (1e-4, 1e-2)}


def logits(pred, n_classes=3):
    out = np.zeros((len(pred), n_classes), np.float32)
    out[np.arange(len(pred)), pred] = 1.0
    return out


def test_identical_outputs_pass():
    y = np.array([0, 1, 2, 1])
    c = compare(logits(y), logits(y), y, TOL, costs=Costs(size_bytes=50), baseline_costs=Costs(size_bytes=100))
    assert c and c.verdict == "pass" and c.agreement == 1.0 and c.flipped == []
    assert c.size_ratio == 0.5 and c.accuracy_delta_points == 0.0


def test_flips_are_listed_and_judged():
    y = np.array([0, 1, 2, 1] * 25)
    target = y.copy()
    target[[3, 7]] = 0  # two of 100 samples flip, both from right to wrong
    c = compare(logits(target), logits(y), y, TOL)
    assert [f.index for f in c.flipped] == [3, 7]
    assert c.flipped[0].true_label == 1 and c.flipped[0].baseline_pred == 1 and c.flipped[0].target_pred == 0
    assert c.accuracy_delta_points == pytest.approx(-2.0)
    assert c.verdict == "fail"  # max_abs_error 1.0 breaks the fail limit
    outcomes = {ch.metric: ch.outcome for ch in c.checks}
    assert outcomes == {"accuracy_drop_points": "degraded", "agreement": "pass", "max_abs_error": "fail"}
    assert not c
    assert "max_abs_error = 1" in c.broken[-1].describe()


def test_judge_directions():
    assert judge("agreement", 0.96, (0.98, 0.95)).outcome == "degraded"
    assert judge("agreement", 0.94, (0.98, 0.95)).outcome == "fail"
    assert judge("accuracy_drop_points", -0.5, (1.0, 3.0)).outcome == "pass"  # a gain is fine


def test_ratios_and_memory_figures():
    y = np.array([0, 1])
    c = compare(logits(y), logits(y), y, {},
                costs=Costs(p50_ms=2.0, memory_bytes={"process_peak_rss_delta_bytes": 0.0,
                                                      "process_peak_rss_bytes": 300.0}),
                baseline_costs=Costs(p50_ms=1.0, memory_bytes={"process_peak_rss_delta_bytes": 100.0,
                                                               "process_peak_rss_bytes": 150.0}))
    assert c.latency_ratio_p50 == 2.0 and c.latency_ratio_p90 is None
    # like is divided by like, even when the preferred figure is zero on one side
    assert c.memory_ratio == 0.0 and c.memory_figures == ("process_peak_rss_delta_bytes",) * 2
    unlike = compare(logits(y), logits(y), y, {}, costs=Costs(memory_bytes={"renderer_peak_rss_bytes": 300.0}),
                     baseline_costs=Costs(memory_bytes={"process_peak_rss_delta_bytes": 100.0}))
    assert unlike.memory_ratio is None and unlike.memory_figures is None
    renderer = primary_memory({"renderer_peak_rss_bytes": 5.0})
    assert primary_memory({}) is None and renderer is not None and renderer[1] == 5.0


def test_nan_outputs_fail():
    y = np.array([0, 1])
    bad = logits(y)
    bad[0, 0] = np.nan
    c = compare(bad, logits(y), y, TOL)
    assert c.max_abs_error == float("inf") and c.verdict == "fail"


def test_tolerance_overrides():
    assert parse_tolerance_overrides(["agreement=0.99,0.97", "max_abs_error=1e-3"]) == {
        "agreement": (0.99, 0.97), "max_abs_error": (1e-3, 1e-3)}
    for bad in ("speed=1", "agreement", "agreement=x", "agreement=1,2,3"):
        with pytest.raises(UnknownOption):
            parse_tolerance_overrides([bad])
