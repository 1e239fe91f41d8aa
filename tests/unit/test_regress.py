"""Regression statistics: injected regressions are flagged, identical nights
raise no alert (the false-alarm rate over 20 nights is measured and pinned), and
each decision rule is pinned by a hand-made case."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool import regress

RNG = np.random.default_rng(7)


def _night(rng, n=2000, median=0.2, slower=1.0):
    return rng.lognormal(np.log(median * slower), 0.25, n)


def test_twenty_identical_nights_raise_no_alert():
    rng = np.random.default_rng(1)
    correct = rng.random(2000) < 0.98
    nights = [_night(rng) for _ in range(20)]
    alerts = []
    for prev, now in zip(nights, nights[1:]):
        alerts += [c for c in (regress.latency_change(prev, now),) if c.alert]
        flips = correct.copy()
        idx = rng.choice(2000, 2, replace=False)  # a sample or two change on any night (threads, rounding)
        flips[idx] = ~flips[idx]
        alerts += [c for c in (regress.accuracy_change(correct, flips),) if c.alert]
    medians = [float(np.median(n)) for n in nights]
    trend = regress.trend(medians)
    assert not alerts and not trend.alert and trend.outcome != "suspicious", (alerts, trend)


def test_a_runtime_30_percent_slower_is_flagged_and_a_2_percent_one_is_not():
    rng = np.random.default_rng(2)
    base = _night(rng)
    slow = regress.latency_change(base, _night(rng, slower=1.3))
    assert slow.outcome == "regression" and slow.alert and slow.effect == pytest.approx(0.3, abs=0.05)
    tiny = regress.latency_change(base, _night(rng, slower=1.02))
    assert not tiny.alert


def test_a_few_flipped_samples_beyond_the_minimum_drop_are_flagged():
    correct = np.ones(2000, bool)
    now = correct.copy()
    now[:30] = False  # 1.5 points
    c = regress.accuracy_change(correct, now, min_drop_points=0.5)
    assert c.outcome == "regression" and c.p_value < 1e-6 and c.effect == pytest.approx(-1.5)
    one = correct.copy()
    one[0] = False  # one sample out of 2,000
    assert regress.accuracy_change(correct, one).outcome == "same"
    balanced = correct.copy()
    balanced[:30] = False
    before = correct.copy()
    before[30:60] = False  # as many newly right as newly wrong: no drop
    assert regress.accuracy_change(before, balanced).outcome == "same"


def test_latency_between_different_and_same_is_unclear():
    a = np.concatenate([np.full(40, 1.0), np.full(40, 2.0)])
    b = np.concatenate([np.full(34, 1.0), np.full(46, 2.0)])
    c = regress.latency_change(a, b, min_relative=0.0, k_iqr=0.0, different_p=1e-9, same_p=0.99)
    assert c.outcome == "unclear" and "measure again" in c.detail


def test_memory_size_and_status_rules():
    assert regress.threshold_change("memory", 100.0, 112.0, 0.10).outcome == "regression"
    assert regress.threshold_change("size", 100.0, 105.0, 0.10).outcome == "same"
    assert regress.status_change(False, True, "runtime_failed").outcome == "newly_failing"
    assert regress.status_change(True, False, "measured").outcome == "fixed"


def test_e_divisive_finds_a_step_and_a_young_step_is_only_suspicious():
    rng = np.random.default_rng(3)
    flat = list(0.20 + rng.normal(0, 0.002, 12))
    stepped = flat + list(0.26 + rng.normal(0, 0.002, 6))
    assert regress.change_points(stepped) == [12]
    assert regress.trend(stepped).outcome == "regression"
    young = flat + [0.26, 0.261]
    assert regress.trend(young).outcome == "suspicious"
    assert regress.trend(flat).outcome == "same"
