"""The measuring rules of deploytool.runtimes.measure: how many inferences one
latency reading times (K), how many readings stand for the asked samples, the
memory-delta arithmetic, and when a busy machine is noted in the row."""

from __future__ import annotations

import time

import numpy as np
import pytest

from deploytool.data.feed import Feed
from deploytool.runtimes import measure
from deploytool.runtimes.measure import (busy_note, inferences_per_reading, memory_delta_bytes, readings_for,
                                         time_batch1)


@pytest.mark.parametrize("one_inference_s, k", [
    (50e-6, 1),  # at the threshold: timed alone
    (200e-6, 1),
    (5e-3, 1),
    (49e-6, 21),  # just under: enough for a ~1 ms reading
    (20e-6, 50),
    (11e-6, 91),
    (1e-6, 1000),
    (1e-8, 1000),  # capped
    (0.0, 1000),
    (float("nan"), 1),  # no estimate (no warm-up): timed alone
])
def test_k_is_one_from_50_us_up_and_fills_a_1_ms_reading_below(one_inference_s, k):
    assert inferences_per_reading(one_inference_s) == k


def test_readings_keep_the_inference_count_but_never_drop_below_the_floor():
    assert readings_for(10_000, 1) == 10_000
    assert readings_for(10_000, 50) == 200  # 10,000 inferences in all, as with K == 1
    assert readings_for(300, 50) == measure.MIN_READINGS  # 6 readings would make a poor p90
    assert readings_for(20, 50) == 20  # fewer samples asked than the floor: that many readings
    assert readings_for(1, 1000) == 1


def test_a_fast_predict_is_timed_k_at_a_time_and_a_slow_one_alone():
    x = Feed.one("x", np.zeros((64, 4), np.float32))
    calls = []

    def fast(b: Feed) -> Feed:
        calls.append(1)
        return b

    lat, first_ms, k = time_batch1(fast, x, warmup_runs=10, samples=64)
    assert k > 1 and len(lat) == readings_for(64, k) and len(calls) == 1 + 10 + k * len(lat)
    assert np.all(lat > 0) and first_ms >= 0

    def slow(b: Feed) -> Feed:
        time.sleep(60e-6)
        return b

    lat, _, k = time_batch1(slow, x, warmup_runs=3, samples=12)
    assert k == 1 and len(lat) == 12 and np.all(lat >= 0.06)

    _, _, k = time_batch1(fast, x, warmup_runs=0, samples=5)
    assert k == 1, "without warm-up there is no estimate: every sample is timed alone"


@pytest.mark.parametrize("idle, peak, delta", [
    (100 * 2**20, 168 * 2**20, 68 * 2**20),
    (100 * 2**20, 100 * 2**20, 0),
    (100 * 2**20, 90 * 2**20, 0),  # the span freed memory (peak reset below the idle figure): it cost nothing
])
def test_memory_delta_is_the_span_peak_above_the_idle_rss(idle, peak, delta):
    assert memory_delta_bytes(idle, peak) == delta


def test_busy_is_noted_only_when_fewer_cpus_are_free_than_threads():
    assert busy_note(0.2, threads=1, cpus=2) is None
    assert busy_note(0.5, threads=1, cpus=2) is None  # one whole CPU free
    note = busy_note(0.9, threads=1, cpus=2)
    assert note and "90% of 2 CPUs" in note and "1 thread" in note
    assert busy_note(0.3, threads=2, cpus=2) is not None
    assert busy_note(None, threads=1, cpus=2) is None  # no /proc/stat: nothing to say


def test_cpu_busy_fraction_reads_proc_stat():
    f = measure.cpu_busy_fraction(0.05)
    assert f is None or 0.0 <= f <= 1.0


def test_busy_fraction_between_two_proc_stat_readings_uses_the_aggregate_line():
    before = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\nintr 1\n"
    after = "cpu  150 0 150 890 10 0 0 0 0 0\ncpu0 99 0 99 401 0 0 0 0 0 0\n"
    # 200 ticks passed, 100 of them idle or iowait: half of all CPUs were busy (the per-CPU lines do not count)
    assert measure.busy_fraction_between(before, after) == 0.5
    assert measure.busy_fraction_between(before, before) is None  # no time passed
    assert measure.busy_fraction_between("", after) is None and measure.busy_fraction_between(before, "oops") is None


def test_busy_note_names_the_phone_that_was_busy_and_not_this_machines_load():
    assert measure.busy_note(0.2, 1, 8, where="the phone emu-1") is None  # 6.4 of 8 CPUs free for 1 thread
    note = measure.busy_note(0.9, 2, 8, where="the phone emu-1")
    assert note is not None
    assert note.startswith("the phone emu-1 was busy") and "90% of 8 CPUs" in note and "1-minute load" not in note
    here = measure.busy_note(0.9, 2, 2)
    assert here is not None and "1-minute load" in here


def test_batch1_timing_of_a_whole_set_stops_at_its_budget_but_never_below_min_readings():
    from deploytool.runtimes.measure import LATENCY_BUDGET_S, MIN_READINGS, readings_within

    assert readings_within(5000, 0.011) == int(LATENCY_BUDGET_S // 0.011) == 1818  # MobileNet-size at 11 ms
    assert readings_within(300, 0.3e-3) == 300  # LeNet-5: the whole set fits
    assert readings_within(5000, 0.7) == MIN_READINGS and readings_within(48, 0.7) == 48  # BERT-size: the floor
    assert readings_within(100, float("nan")) == 100


def test_time_batch1_times_fewer_samples_of_a_slow_model_unless_a_count_was_asked(monkeypatch):
    import time

    from deploytool.runtimes import measure

    monkeypatch.setattr(measure, "LATENCY_BUDGET_S", 0.3)  # a smaller budget, the same rule: 10 ms sleeps

    def slow(x):
        time.sleep(0.01)

    monkeypatch.setattr(measure, "MIN_READINGS", 5)
    lat, _, k = measure.time_batch1(slow, Feed.one("x", np.zeros((200, 1))), warmup_runs=2, samples=None)
    assert k == 1 and 5 <= len(lat) <= 30
    lat, _, _ = measure.time_batch1(slow, Feed.one("x", np.zeros((200, 1))), warmup_runs=2, samples=40)
    assert len(lat) == 40


def test_the_whole_set_pass_bounds_a_batch_by_its_bytes():
    from deploytool.data.feed import Feed
    from deploytool.runtimes.measure import WHOLE_SET_BATCH_BYTES, whole_set_batch

    mnist = Feed.one("x", np.zeros((10, 28, 28, 1), np.float32))  # 3 KiB a sample: the runtime's batch
    assert whole_set_batch(mnist, 256) == 256 and whole_set_batch(mnist, 64) == 64
    images = Feed.one("x", np.zeros((3, 224, 224, 3), np.float32))  # 588 KiB a sample: 27 fit in 16 MiB
    assert WHOLE_SET_BATCH_BYTES == 16 * 2**20 and whole_set_batch(images, 256) == 27
    assert whole_set_batch(Feed.one("x", np.zeros((2, 3, 1024, 1024), np.float32)), 256) == 1  # 12 MiB a sample
    assert whole_set_batch(Feed.one("x", np.zeros((2, 8, 1024, 1024), np.float32)), 256) == 1  # 32 MiB: one at a time
    tokens = Feed({"input_ids": np.zeros((4, 128), np.int64), "attention_mask": np.zeros((4, 128), np.int64)})
    assert whole_set_batch(tokens, 256) == 256  # 2 KiB a sample
    audio = Feed({"x": np.zeros((4, 80, 3000), np.float32)})  # whisper's log-mel: 938 KiB
    assert whole_set_batch(audio, 256) == 17
