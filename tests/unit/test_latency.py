"""Paired latency (issue 25): the definitions of deploytool.latency (block ratios, the median of them, the seeded
percentile bootstrap over blocks, the machine's drift), the lab's judgement of a paired change
(deploytool.lab.regress.paired_latency_change, process_spread), and the paired timing loop's structure and load
arithmetic (deploytool.runtimes.measure). Hand-computed cases: changing a formula fails here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deploytool.lab import regress
from deploytool.latency import (
    MIN_CLEAN_BLOCKS,
    PairedLatency,
    block_ratios,
    bootstrap_ci,
    clean_blocks,
    drift_of,
    floor_of,
    quiet_blocks,
    ratio_of,
    ratios_to_judge,
    unpaired_sentence,
)
from deploytool.data.feed import Feed
from deploytool.result import Combo, Measurement, Result, Status
from deploytool.runtimes import measure


def test_a_block_ratio_is_the_targets_figure_over_the_references_in_the_same_block():
    assert block_ratios([2.0, 3.0, 1.0], [1.0, 2.0, 4.0]).tolist() == [2.0, 1.5, 0.25]
    # a block without a positive finite figure on either side is left out
    assert block_ratios([2.0, float("nan"), 1.0, 3.0], [1.0, 1.0, 0.0, 3.0]).tolist() == [2.0, 1.0]
    with pytest.raises(ValueError, match="pairs"):
        block_ratios([1.0, 2.0], [1.0])


def test_the_ratio_is_the_median_of_the_block_ratios_not_a_ratio_of_medians():
    assert ratio_of([1.0, 2.0, 4.0]) == 2.0
    assert ratio_of([1.0, 2.0, 3.0, 10.0]) == 2.5
    t, r = [1.0, 4.0, 9.0], [1.0, 1.0, 3.0]  # block ratios 1, 4, 3: median 3; median(t)/median(r) would be 4
    assert ratio_of(block_ratios(t, r)) == 3.0
    assert math.isnan(ratio_of([]))


def test_a_clean_block_has_both_sides_within_ten_percent_of_their_fastest_block():
    t = [1.0, 1.1, 1.2, 1.0, 1.05]
    r = [2.0, 2.0, 2.0, 2.3, 2.2]
    # target floor 1.0 (<= 1.1 clean), reference floor 2.0 (<= 2.2 clean)
    assert clean_blocks(t, r).tolist() == [True, True, False, False, True]
    assert clean_blocks([1.0, 0.0, float("nan")], [1.0, 1.0, 1.0]).tolist() == [True, False, False]


def test_the_ratio_comes_from_the_clean_blocks_when_there_are_five_else_from_all():
    # six steady blocks at ratio 0.05, four where a competing job doubled the reference (ratio 0.025)
    t = [0.02] * 10
    r = [0.4] * 6 + [0.8] * 4
    assert ratios_to_judge(t, r).tolist() == pytest.approx([0.05] * 6)
    p = PairedLatency.of(t, r, "ref")
    assert p.ratio == pytest.approx(0.05) and p.clean == 6 and p.blocks == 10
    assert "from the 6 blocks where both were within 10% of their fastest" in p.describe()
    # only four clean blocks: every block counts (median of 0.05 x4 and 0.025 x6 = 0.025)
    r = [0.4] * 4 + [0.8] * 6
    assert ratios_to_judge(t, r).size == 10 and PairedLatency.of(t, r, "ref").ratio == pytest.approx(0.025)


def test_the_references_floor_from_earlier_rows_keeps_a_busy_spell_out_of_the_ratio():
    # a co-tenant slowed both sides, each by its own factor: the reference 1.6x, the target 1.4x
    t = [0.028] * 6 + [0.020] * 6
    r = [0.64] * 6 + [0.40] * 6
    # timed over both spells, the quiet blocks are the row's fastest: they alone are clean
    assert clean_blocks(t, r).tolist() == [False] * 6 + [True] * 6
    # a row timed only in the busy spell: alone, all of its blocks look clean
    assert clean_blocks(t[:6], r[:6]).all() and PairedLatency.of(t[:6], r[:6], "ref").ratio == pytest.approx(0.04375)
    # against the floor the reference set on earlier rows (0.40 ms) none is: the row never saw the quiet machine
    assert quiet_blocks(t[:6], r[:6], 0.40) == 0 < MIN_CLEAN_BLOCKS
    assert not clean_blocks(t[:6], r[:6], reference_floor_ms=0.40).any()
    p = PairedLatency.of(t, r, "ref", reference_floor_ms=0.40)
    assert p.ratio == pytest.approx(0.05) and p.clean == 6 and p.ratios.tolist() == pytest.approx([0.05] * 6)
    assert "their fastest (the reference's over the rows timed before it too)" in p.describe()
    # a floor above this row's fastest block changes nothing; a NaN or missing floor is no floor
    assert clean_blocks(t, r, reference_floor_ms=0.5).tolist() == clean_blocks(t, r).tolist()
    assert quiet_blocks(t, r, float("nan")) == 6
    no_floor = PairedLatency.from_json({**p.to_json(), "reference_floor_ms": None})
    assert no_floor is not None and math.isnan(no_floor.reference_floor_ms)
    assert PairedLatency.from_json(p.to_json()) == p
    # the floor after a timing: its fastest positive finite block, or the floor before when lower
    assert floor_of([0.64, 0.0, float("nan"), 0.42]) == 0.42 == floor_of([0.64, 0.42], 0.5)
    assert floor_of([0.64], 0.40) == 0.40 and math.isnan(floor_of([float("nan")]))


def test_the_bootstrap_interval_by_hand():
    assert bootstrap_ci([1.3] * 20) == (1.3, 1.3)  # every draw's median is 1.3
    assert bootstrap_ci([0.8]) == (0.8, 0.8)
    # two blocks: a draw of two has median 1 (p 1/4), 1.5 (1/2) or 2 (1/4); its 2.5% and 97.5% quantiles are 1 and 2
    assert bootstrap_ci([1.0, 2.0]) == (1.0, 2.0)
    # three blocks: median 1 with p 7/27, 2 with 13/27, 3 with 7/27; the 95% interval spans them all, the 40% one
    # (30% .. 70% quantiles) only the middle
    assert bootstrap_ci([1.0, 2.0, 3.0]) == (1.0, 3.0)
    assert bootstrap_ci([1.0, 2.0, 3.0], level=0.4) == (2.0, 2.0)
    assert all(math.isnan(v) for v in bootstrap_ci([]))


def test_the_bootstrap_is_seeded_resampled_2000_times_and_pinned():
    ratios = [1.0, 1.1, 1.2, 0.9, 1.05, 1.3, 0.95, 1.15]
    assert bootstrap_ci(ratios) == bootstrap_ci(list(ratios))  # the same seed every time
    lo, hi = bootstrap_ci(ratios)
    assert (round(lo, 6), round(hi, 6)) == (0.95, 1.2)  # pinned: the seed, resamples, median or quantiles changed
    rng = np.random.default_rng(0)
    x = np.asarray(ratios)
    draws = np.median(x[rng.integers(0, x.size, size=(2000, x.size))], axis=1)
    assert (lo, hi) == tuple(np.quantile(draws, [0.025, 0.975]))


def test_drift_is_the_largest_reference_block_over_the_smallest():
    assert drift_of([2.0, 3.0, 4.0]) == 2.0
    assert drift_of([0.5, 0.5]) == 1.0
    assert drift_of([1.0, float("nan"), 0.0, 1.5]) == 1.5


def test_a_paired_latency_states_its_ratio_interval_drift_and_load_in_one_sentence():
    t = [1.08] * 10 + [1.05, 1.11] * 5
    p = PairedLatency.of(t, [1.0] * 10 + [1.3] * 10, "the PC baseline (keras)", cpus=(1,), target_p50_ms=0.021,
                         reference_p50_ms=0.41, others_busy_fraction=0.25, cpu_count=2)
    # the ten blocks with the reference at 1.3 are not clean: the ratio is the first ten's
    assert p.blocks == 20 and p.clean == 10 and p.ratio == ratio_of(block_ratios(t[:10], [1.0] * 10)) == 1.08
    assert (p.ratio_low, p.ratio_high) == bootstrap_ci(p.ratios)
    assert p.drift == pytest.approx(1.3)
    s = p.describe()
    assert s.startswith("paired with the PC baseline (keras) in 20 alternating blocks on CPU 1, the ratio from the "
                        "10 blocks where both were within 10% of their fastest: ")
    assert f"{p.ratio:.3g}x [{p.ratio_low:.3g}, {p.ratio_high:.3g}]" in s
    assert "p50 0.021 ms beside the reference's 0.41 ms" in s
    assert "machine drift 1.3x during timing; other processes took 25% of 2 CPUs" in s
    assert unpaired_sentence("web:wasm", "a browser", 7).startswith("timed alone (web:wasm, 7 inferences per timer reading), not paired: a browser; ")


def test_a_paired_latency_survives_the_results_json():
    p = PairedLatency.of([0.02] * 5, [0.4] * 5, "the PC baseline (torch)", cpus=(0,), target_p50_ms=0.02,
                         reference_p50_ms=float("nan"))
    r = Result(run_id="r", combo_key="k", model="m", dataset="d", combo=Combo("keras", "tflite", "none", "host"),
               status=Status.MEASURED, measurement=Measurement(0.02, 0.03, 0.04, 0.02, 100, paired=p))
    measurement = Result.from_json(r.to_json()).measurement
    assert measurement is not None
    back = measurement.paired
    assert back is not None
    assert back.target_block_ms == p.target_block_ms and back.cpus == (0,) and back.ratio == pytest.approx(0.05)
    assert math.isnan(back.reference_p50_ms)  # NaN is stored as null and read back as NaN
    old = r.to_json()
    del old["measurement"]["paired"]  # a row stored before rows were paired
    measurement = Result.from_json(old).measurement
    assert measurement is not None and measurement.paired is None


def _paired(ratio: float, spread: float = 0.02, n: int = 20) -> PairedLatency:
    """Blocks whose ratios are `ratio` x a fixed spread pattern (seeded, no machine involved)."""
    wiggle = np.exp(np.random.default_rng(7).normal(0, spread, n))
    return PairedLatency.of(list(ratio * wiggle), [1.0] * n, "the PC baseline (keras)")


def test_a_paired_change_needs_rank_evidence_apart_intervals_and_more_than_the_process_spread():
    before = _paired(0.05)
    assert regress.paired_latency_change(before, _paired(0.05)).outcome == "same"
    up = regress.paired_latency_change(before, _paired(0.065))  # 30% slower
    assert up.outcome == "regression" and up.effect == pytest.approx(0.3) and up.alert
    assert regress.paired_latency_change(before, _paired(0.04)).outcome == "improvement"
    # 30% is within 3 x a process-to-process spread of 10% (it needs e^0.3 - 1 = 35%)
    assert regress.paired_latency_change(before, _paired(0.065), spread=0.1).outcome == "same"
    assert regress.paired_latency_change(before, _paired(0.065), spread=0.05).outcome == "regression"
    # a 3% move is under the minimum effect (5%) however certain
    assert regress.paired_latency_change(_paired(0.05, 0.001), _paired(0.0515, 0.001)).outcome == "same"
    # overlapping intervals are not a regression
    wide = regress.paired_latency_change(_paired(0.05, 0.4), _paired(0.06, 0.4))
    assert wide.outcome in ("same", "unclear")
    assert regress.paired_latency_change(_paired(0.05, n=3), _paired(0.07, n=3)).outcome == "unclear"


def test_the_process_spread_by_hand():
    assert regress.process_spread([0.0, 0.1, 0.2]) == pytest.approx(1.4826 * 0.1)
    assert regress.process_spread([0.0, 0.3]) == pytest.approx(0.3 / math.sqrt(2))
    assert regress.process_spread([0.1]) is None


def test_load_during_timing_counts_as_the_rows_load():
    quiet = regress.MachineLoad.of({"cpu_busy_fraction_before_timing": 0.05, "cpu_count": 2})
    assert quiet is not None and not quiet.busy
    during = regress.MachineLoad.of({"cpu_busy_fraction_before_timing": 0.05, "cpu_busy_fraction_during_timing": 0.6,
                                     "cpu_count": 2})
    assert during is not None and during.others_fraction == 0.6 and during.busy


_STAT = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\n"
_STAT2 = "cpu  300 0 100 1400 0 0 0 0 0 0\ncpu0 250 0 50 500 0 0 0 0 0 0\ncpu1 50 0 50 900 0 0 0 0 0 0\n"


def test_other_processes_share_during_timing_is_all_busy_minus_our_own():
    # 800 ticks passed (8 s of 2 CPUs at 100 Hz), 200 busy: 25%; we used 1 s of CPU over 4 s wall on 2 CPUs: 12.5%
    assert measure.others_busy_fraction(_STAT, _STAT2, own_cpu_s=1.0, wall_s=4.0, cpus=2) == pytest.approx(0.125)
    assert measure.others_busy_fraction(_STAT, _STAT2, own_cpu_s=4.0, wall_s=4.0, cpus=2) == 0.0
    assert measure.per_cpu_ticks(_STAT2) == {0: (800, 500), 1: (1000, 900)}


def test_a_quick_run_pairs_in_fewer_blocks_one_per_ten_samples_at_least_five():
    assert measure.pair_blocks(None) == measure.pair_blocks(300) == measure.pair_blocks(200) == 20
    assert measure.pair_blocks(150) == 15 and measure.pair_blocks(20) == measure.pair_blocks(10) == 5


def test_paired_timing_alternates_readings_and_flips_the_order_each_block():
    calls: list[str] = []

    def target(x: Feed) -> Feed:
        calls.append("t")
        return x  # unused: only the calls are counted

    def reference(x: Feed) -> Feed:
        calls.append("r")
        return x
    out = measure.time_paired(target, reference, Feed.one("x", np.zeros((4, 1))), Feed.one("x", np.zeros((4, 1))),
                              warmup_runs=0, blocks=2,
                              block_s=0.0)
    per = out["readings_per_block"]
    assert per == measure.PAIR_READINGS and len(out["target_block_ms"]) == len(out["reference_block_ms"]) == 2
    kt, kr = out["k"]
    # every reading: three untimed inferences of its side, then its K timed ones
    warm = measure.PAIR_WARM_INFERENCES
    assert warm == 3
    n = kt + warm + kr + warm
    timed = calls[-2 * per * n:]  # after the warm-up and the trial reading
    first, second = timed[: per * n], timed[per * n:]
    assert first[:n] == ["t"] * (kt + warm) + ["r"] * (kr + warm)
    assert second[:n] == ["r"] * (kr + warm) + ["t"] * (kt + warm)
    assert len(out["target_ms"]) == len(out["reference_ms"]) == 2 * per


def test_paired_timing_goes_on_past_its_blocks_until_enough_says_so_or_max_blocks():
    seen: list[int] = []

    def enough(t: list[float], r: list[float]) -> bool:
        assert len(t) == len(r)
        seen.append(len(t))
        return len(t) >= 7

    out = measure.time_paired(lambda x: x, lambda x: x, np.zeros((4, 1)), np.zeros((4, 1)), warmup_runs=0, blocks=3,
                              block_s=0.0, max_blocks=10, enough=enough)
    assert len(out["target_block_ms"]) == 7 and seen == [3, 4, 5, 6, 7]  # asked after each block past the third
    out = measure.time_paired(lambda x: x, lambda x: x, np.zeros((4, 1)), np.zeros((4, 1)), warmup_runs=0, blocks=3,
                              block_s=0.0, max_blocks=5, enough=lambda t, r: False)
    assert len(out["reference_block_ms"]) == 5  # never enough: max_blocks
    out = measure.time_paired(lambda x: x, lambda x: x, np.zeros((4, 1)), np.zeros((4, 1)), warmup_runs=0, blocks=3,
                              block_s=0.0, max_blocks=10)
    assert len(out["target_block_ms"]) == 3  # no `enough`: exactly `blocks`
    assert measure.PAIR_BLOCKS < measure.PAIR_FIRST_BLOCKS <= measure.PAIR_MAX_BLOCKS


def test_a_spread_from_few_processes_is_taken_at_its_upper_bound():
    # sd x sqrt(df / chi2.ppf(0.05, df)), df = processes - 1: chi2.ppf(0.05, 1) = 0.0039321, (0.05, 2) = 0.10259
    assert regress.spread_upper_bound(0.01, 2) == pytest.approx(0.01 * math.sqrt(1 / 0.0039321), rel=1e-4)
    assert regress.spread_upper_bound(0.01, 3) == pytest.approx(0.01 * math.sqrt(2 / 0.10259), rel=1e-4)
    assert regress.spread_upper_bound(0.01, 200) < 0.0113  # many processes: close to the estimate
    with pytest.raises(ValueError):
        regress.spread_upper_bound(0.01, 1)
    # the quiet night of examples/lab.toml that was flagged: +5.5% against a spread of 0.2% from tonight's two
    # processes; at its upper bound (3.2%) the bar is 3 x 3.2% = 10%, and the move is not a change
    before, now = _paired(0.0324, 0.01), _paired(0.0342, 0.01)
    assert regress.paired_latency_change(before, now, spread=0.002).outcome == "regression"
    held = regress.paired_latency_change(before, now, spread=0.002, processes=2)
    assert held.outcome == "same" and "95% upper bound" in held.detail and "over 2 processes" in held.detail
    # a 30% slower runtime still clears the bar of five quiet nights with a 2% spread (3 x 4.7% = 15%)
    assert regress.paired_latency_change(_paired(0.05, 0.01), _paired(0.065, 0.01), spread=0.02,
                                         processes=5).outcome == "regression"


def test_a_row_timed_alone_with_few_nights_must_move_beyond_tonights_two_processes():
    # examples/lab.toml, a quiet night: an onnxruntime-web row (timed alone) read +38.5% with one earlier night
    c = regress.Change("latency", "regression", "p50 0.13 -> 0.18 ms (+38.5%), p = 6e-77", 6e-77, 0.385)
    assert regress.beyond_tonights_processes(c, [], 0.18).outcome == "unclear"  # first pass: measure it again
    # measured again in a new process: 0.17 then 0.18 ms, a spread of |ln(17/18)| / sqrt(2) = 4.0%, whose upper
    # bound (x15.9 for two processes) puts the bar at e^(3 x 64%) - 1: +38.5% is within it
    same = regress.beyond_tonights_processes(c, [0.17], 0.18)
    assert same.outcome == "same" and "tonight's 2 processes" in same.detail
    # a runtime that is really slower reads the same in both processes: the regression stands
    held = regress.beyond_tonights_processes(c, [0.18], 0.18)
    assert held.outcome == "regression" and held.alert and "beyond 3 x 0.0%" in held.detail
    # three processes: the sample standard deviation of their logs, at its upper bound for three (x4.4)
    three = regress.beyond_tonights_processes(c, [0.18, 0.181], 0.18)
    sd = float(np.std(np.log([0.18, 0.181, 0.18]), ddof=1))
    assert three.outcome == "regression" and f"3 x {regress.spread_upper_bound(sd, 3):.1%}" in three.detail


def test_tonights_spread_is_the_sample_standard_deviation_of_its_processes_logs():
    assert regress.tonights_spread([0.0]) is None
    assert regress.tonights_spread([np.log(0.17), np.log(0.18)]) == pytest.approx(abs(np.log(17 / 18)) / np.sqrt(2))
    # one process of three in a slower band (+25%) is the spread, not an outlier the MAD would drop
    logs = [np.log(0.080), np.log(0.080), np.log(0.100)]
    assert regress.process_spread(logs) == 0.0
    assert regress.tonights_spread(logs) == pytest.approx(np.log(1.25) / np.sqrt(3))


# ------------------------------------------------------------------ sizing by the time of one inference (issue 38)
def _cost_s(plan: measure.PairPlan, t: float, r: float, kt: int = 1, kr: int = 1) -> float:
    """The most seconds `plan`'s blocks can take."""
    return plan.max_blocks * plan.readings_per_block * ((kt + plan.warm_inferences) * t + (kr + plan.warm_inferences) * r)


def test_a_sub_millisecond_model_is_timed_as_before_well_inside_the_budget():
    t, r = 30e-6, 35e-6  # LeNet-5 in onnxruntime and Keras
    kt, kr = measure.inferences_per_reading(t, measure.PAIR_READING_S), measure.inferences_per_reading(r, measure.PAIR_READING_S)
    plan = measure.plan_pairing(t, r, kt, kr, blocks=measure.PAIR_FIRST_BLOCKS, max_blocks=measure.PAIR_MAX_BLOCKS)
    pair_s = (kt + 3) * t + (kr + 3) * r
    assert (plan.blocks, plan.max_blocks, plan.warm_inferences, plan.limited) == (40, 60, 3, False)
    assert plan.readings_per_block == max(measure.PAIR_READINGS, math.ceil(measure.PAIR_BLOCK_S / pair_s))
    assert _cost_s(plan, t, r, kt, kr) < 1.0 and plan.why(t, r) == ""


def test_a_mobilenet_sized_model_drops_the_warm_inferences_and_keeps_its_blocks():
    plan = measure.plan_pairing(11e-3, 20e-3, blocks=40, max_blocks=60)
    assert (plan.blocks, plan.max_blocks, plan.readings_per_block, plan.warm_inferences) == (40, 60, 8, 0)
    assert not plan.limited and _cost_s(plan, 11e-3, 20e-3) <= measure.PAIR_BUDGET_S


def test_a_bert_sized_model_keeps_blocks_of_one_reading_within_the_budget():
    """0.7 s and 0.5 s per inference: 1.2 s a pair of readings; 20 s hold 16 blocks of one reading each."""
    assert measure.PAIR_BUDGET_S == 20.0
    plan = measure.plan_pairing(0.7, 0.5, blocks=40, max_blocks=60)
    assert (plan.blocks, plan.max_blocks, plan.readings_per_block, plan.warm_inferences) == (16, 16, 1, 0)
    assert plan.limited and _cost_s(plan, 0.7, 0.5) <= 20.0
    assert plan.why(0.7, 0.5) == ("1 reading(s) per side per block, as one inference takes 700 ms, the reference's "
                                  "500 ms, and a row's paired timing has 20 s")


def test_the_cost_never_passes_the_budget_and_the_timing_only_shrinks_as_inferences_grow():
    """The blocks timed in any case, and the readings the longest timing holds (blocks x readings), never grow with
    the inference time — on each side of PAIR_LONG_INFERENCE_S, where the warm inferences (3 per reading) stop: just
    below it a model gets less than just above, its warm inferences costing the budget three times its reading."""
    short: list[tuple[int, int]] = []
    long: list[tuple[int, int]] = []
    for t in np.geomspace(1e-5, 1.9, 60):
        plan = measure.plan_pairing(float(t), float(t), blocks=40, max_blocks=60)
        assert _cost_s(plan, t, t) <= measure.PAIR_BUDGET_S and plan.blocks >= measure.MIN_PAIR_BLOCKS
        (short if t < measure.PAIR_LONG_INFERENCE_S else long).append(
            (plan.blocks, plan.max_blocks * plan.readings_per_block))
    for side in (short, long):
        for i in (0, 1):
            assert [x[i] for x in side] == sorted((x[i] for x in side), reverse=True)
    assert short[0][0] == long[0][0] == 40 and long[-1][0] == 5  # 1.9 s a side: 20 s hold 5 pairs of readings


def test_an_inference_too_slow_for_five_blocks_is_not_paired_and_says_why():
    with pytest.raises(measure.PairingTooLong, match=r"one inference takes 4 s \(the reference's 3.5 s\): 5 blocks"):
        measure.plan_pairing(4.0, 3.5, blocks=20)


def test_a_budget_sized_row_says_so_in_its_sentence_and_keeps_it_through_json():
    p = PairedLatency.of([1.0] * 25, [2.0] * 25, "the PC baseline (onnx)", budget_s=30.0,
                         sized=measure.plan_pairing(0.7, 0.5, blocks=40, max_blocks=60).why(0.7, 0.5))
    assert "in 25 alternating blocks (1 reading(s) per side per block, as one inference takes 700 ms" in p.describe()
    assert PairedLatency.from_json(p.to_json()) == p


def test_slow_sides_are_timed_in_the_planned_blocks_without_warm_inferences():
    """time_paired follows its plan, sized from the inference time it measured (the real clock, 12 ms sleeps): a
    side slower than PAIR_LONG_INFERENCE_S has no untimed warm inferences, and a 0.6 s budget holds about 24 pairs
    of readings, so blocks of one reading each, alternating which side goes first."""
    import time as _time

    calls: list[str] = []

    def slow(tag: str):
        def run(x):
            calls.append(tag)
            _time.sleep(0.012)
        return run

    out = measure.time_paired(slow("t"), slow("r"), np.zeros((4, 1)), np.zeros((4, 1)), warmup_runs=3, blocks=20,
                              budget_s=0.6)
    plan = out["plan"]
    assert plan.warm_inferences == 0 and plan.limited and plan.readings_per_block == 1
    assert len(out["target_block_ms"]) == plan.blocks == len(out["target_ms"])
    assert 5 <= plan.blocks <= 25 and calls[-2 * plan.blocks:][:4] == ["t", "r", "r", "t"]
