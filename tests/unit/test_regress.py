"""Regression statistics: injected regressions are flagged, identical nights
raise no alert (the false-alarm rate over 20 nights is measured and pinned), and
each decision rule is pinned by a hand-made case."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.lab import regress

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
    assert c.outcome == "regression" and c.p_value is not None and c.p_value < 1e-6 and c.effect == pytest.approx(-1.5)
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


# ------------------------------------------------------------------ latency and the machine's load
QUIET = regress.MachineLoad(others_fraction=0.03, cpus=2, threads=1)
BUSY = regress.MachineLoad(others_fraction=0.85, cpus=2, threads=1)  # 0.3 CPUs free for a 1-thread row


def test_a_slowdown_on_a_busy_night_is_unclear_naming_both_loads_and_never_an_alert():
    rng = np.random.default_rng(4)
    base, slow = _night(rng), _night(rng, slower=1.3)
    for before, now in ((QUIET, BUSY), (BUSY, QUIET), (BUSY, BUSY)):
        c = regress.latency_change(base, slow, load_before=before, load_now=now)
        assert c.outcome == "unclear" and not c.alert, c
        assert f"load {before} vs {now}" in c.detail and "machine busy" in c.detail and "+3" in c.detail, c.detail
    # faster on a quiet night after a busy one is not an improvement either
    assert regress.latency_change(slow, base, load_before=BUSY, load_now=QUIET).outcome == "unclear"
    # the same arrays stay "same" whatever the load: nothing to explain away
    assert regress.latency_change(base, _night(rng), load_before=QUIET, load_now=BUSY).outcome == "same"


def test_loads_that_differ_by_half_a_cpu_confound_even_when_neither_is_busy():
    rng = np.random.default_rng(5)
    one_core_taken = regress.MachineLoad(0.5, cpus=2, threads=1)  # a burner on one of two cores: 1 CPU still free
    assert not one_core_taken.busy and not one_core_taken.quiet
    c = regress.latency_change(_night(rng), _night(rng, slower=1.3), load_before=QUIET, load_now=one_core_taken)
    assert c.outcome == "unclear" and "50% of 2 CPUs" in c.detail
    near = regress.MachineLoad(0.2, cpus=2, threads=1)  # 0.34 CPUs apart: comparable
    assert regress.load_confounds(QUIET, near) == ""


def test_a_slowdown_between_two_quiet_nights_is_still_a_regression():
    rng = np.random.default_rng(6)
    c = regress.latency_change(_night(rng), _night(rng, slower=1.3), load_before=QUIET,
                               load_now=regress.MachineLoad(0.12, cpus=2, threads=1))
    assert c.outcome == "regression" and c.alert and c.effect == pytest.approx(0.3, abs=0.05)
    # and rows that recorded no load (older rows) are judged as before
    assert regress.latency_change(_night(rng), _night(rng, slower=1.3), load_now=BUSY).outcome == "regression"


def test_busy_is_fewer_free_cpus_than_the_rows_threads():
    assert regress.MachineLoad(0.4, cpus=4, threads=2).busy is False  # 2.4 CPUs free
    assert regress.MachineLoad(0.6, cpus=4, threads=2).busy is True  # 1.6 free for 2 threads
    env = {"cpu_busy_fraction_before_timing": 0.6, "cpu_count": 4, "threads": 2}
    assert regress.MachineLoad.of(env) == regress.MachineLoad(0.6, 4, 2)
    assert regress.MachineLoad.of({"threads": 1}) is None  # no reading
    assert regress.MachineLoad.of({"cpu_busy_fraction_before_timing": 0.6}) is None  # no CPU count, none given
    load = regress.MachineLoad.of({"cpu_busy_fraction_before_timing": 0.6}, default_cpus=2)
    assert load is not None and load.busy


def test_twenty_nights_with_load_alternating_raise_no_alert_but_did_before_loads_were_known():
    """The issue's false alarm: every other night a process takes a core and the runtime reads slower."""
    rng = np.random.default_rng(8)
    nights = [(_night(rng, slower=1.35), BUSY) if i % 2 else (_night(rng), QUIET) for i in range(20)]
    aware, blind = [], []
    for (prev, lp), (now, ln) in zip(nights, nights[1:]):
        aware.append(regress.latency_change(prev, now, load_before=lp, load_now=ln))
        blind.append(regress.latency_change(prev, now))
    assert not [c for c in aware if c.alert]
    assert sum(c.outcome == "unclear" for c in aware) == 19  # each said, none dropped
    assert sum(c.alert for c in blind) >= 9  # the same nights judged without their loads


def test_a_move_within_the_cells_night_to_night_spread_is_noise_and_a_30_percent_step_is_not():
    from deploytool.lab.regress import within_nightly_noise

    # real idle LiteRT nightly medians (ms) of one unchanged cell, each night a new process
    nights = [0.0301, 0.0309, 0.0325, 0.0242, 0.0292, 0.0303]
    assert within_nightly_noise(nights, 0.0280)  # +16% on the fastest night, inside the spread
    assert "3 x" in within_nightly_noise(nights, 0.0330)
    assert within_nightly_noise(nights, 0.0393) == ""  # 30% slower than the usual level: a change
    assert within_nightly_noise(nights, 0.0150) == ""  # a real speed-up too
    assert within_nightly_noise(nights[:2], 0.0280) == ""  # two nights cannot say what the spread is
    # three nights: their spread (1.4826 x 0.01 ms) is taken at its 95% upper bound, x sqrt(2 / chi2.ppf(0.05, 2))
    # = x4.4: +25% is within 3 x 0.065 ms, +110% is not
    assert "upper bound" in within_nightly_noise([0.23, 0.24, 0.25], 0.30)
    assert within_nightly_noise([0.23, 0.24, 0.25], 0.50) == ""
    # identical nights (a seeded double): no spread, so any move is judged by the pairwise test alone
    assert within_nightly_noise([0.5, 0.5, 0.5], 0.65) == ""
