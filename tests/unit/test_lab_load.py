"""The lab judges latency against the machine's load, and nothing else by it: rows (in memory, their
per-sample files in a temporary folder) timed on a busy machine are "unclear", accuracy still alerts on them,
and tonight's latency is compared with the last good night timed under a comparable load."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from deploytool.lab import regress
from tests.scores import compare
from deploytool.lab.labfile import Regression
from deploytool.lab.night import _compare, _fastest, _on_the_trend, latency_reference
from deploytool.latency import PairedLatency
from deploytool.result import Combo, Measurement, Result, Status

N = 500
Y = np.random.default_rng(0).integers(0, 10, N)
COMBO = Combo("keras", "tflite", "none", "host", runtime="lab-double")


def _row(tmp_path, name, busy, slower=1.0, flips=0, seed=0):
    rng = np.random.default_rng(seed)
    logits = np.eye(10, dtype=np.float32)[Y] * 5
    logits[np.arange(flips), (Y[:flips] + 1) % 10] += 10  # the first `flips` samples now wrong
    lat = rng.lognormal(np.log(0.2 * slower), 0.2, 300)
    np.save(tmp_path / f"{name}-out.npy", logits)
    np.save(tmp_path / f"{name}-lat.npy", lat)
    cmp_ = compare(logits, np.eye(10, dtype=np.float32)[Y], Y, {})
    env = {"threads": 1} if busy is None else {"cpu_busy_fraction_before_timing": busy, "cpu_count": 2, "threads": 1}
    return Result(run_id=name, combo_key="k", model="lenet5", dataset="mnist", combo=COMBO, status=Status.MEASURED,
                  comparison=cmp_, measurement=Measurement(float(np.median(lat)), 0, 0, 0, len(lat)), environment=env,
                  outputs_path=str(tmp_path / f"{name}-out.npy"), latency_path=str(tmp_path / f"{name}-lat.npy"))


def _changes(prev, now, ref=None, first=None):
    """`first`: tonight's first measurement, when `now` is the cell measured again in a new process."""
    return {c.metric: c for c in _compare(prev, now, Y, Regression(), regress, ref or ("n1", prev), True,
                                          others=[first] if first is not None else [])}


def test_on_a_busy_night_latency_is_unclear_but_flipped_samples_still_alert(tmp_path):
    quiet = _row(tmp_path, "n1", busy=0.02)
    busy = _row(tmp_path, "n2", busy=0.9, slower=1.4, flips=30, seed=1)
    got = _changes(quiet, busy)
    assert got["latency"].outcome == "unclear" and not got["latency"].alert
    assert "machine busy: load 2% of 2 CPUs vs 90% of 2 CPUs (busy)" in got["latency"].detail
    assert got["accuracy"].outcome == "regression" and got["accuracy"].alert  # load never excuses accuracy


def test_on_two_quiet_nights_a_slowdown_alerts(tmp_path):
    n1, n2 = _row(tmp_path, "n1", busy=0.02), _row(tmp_path, "n2", busy=0.1, slower=1.3, seed=1)
    # one earlier night cannot say the cell's night-to-night spread: tonight's row is measured again first
    first = _changes(n1, n2)["latency"]
    assert first.outcome == "unclear" and "measure again in a new process" in first.detail
    # the second process reads the same slowdown: beyond the spread of tonight's two processes, an alert
    got = _changes(n1, n2, first=replace(n2.measurement, p50_ms=n2.measurement.p50_ms * 1.001))
    assert got["latency"].outcome == "regression" and got["latency"].effect == pytest.approx(0.3, abs=0.06)
    assert got["accuracy"].outcome == "same"


def test_latency_is_compared_with_the_last_good_night_timed_under_a_comparable_load(tmp_path):
    n1, n2 = _row(tmp_path, "n1", busy=0.02), _row(tmp_path, "n2", busy=0.9, slower=1.4, seed=1)
    good = [("n1", n1), ("n2", n2)]
    assert latency_reference(good, _row(tmp_path, "n3", busy=0.05, seed=2), 0.5)[0] == "n1"
    assert latency_reference(good, _row(tmp_path, "n3", busy=0.95, seed=2), 0.5)[0] == "n1"  # busy: the last quiet
    assert latency_reference(good, _row(tmp_path, "n3", busy=None, seed=2), 0.5)[0] == "n2"  # no reading: as before
    # a real slowdown that began on the busy night n2 is flagged on the next quiet night, against n1
    slow_quiet = _row(tmp_path, "n3", busy=0.04, slower=1.3, seed=3)
    got = _changes(n2, slow_quiet, latency_reference(good, slow_quiet, 0.5), first=slow_quiet.measurement)
    assert got["latency"].outcome == "regression" and "against n1" in got["latency"].detail


def test_only_nights_timed_on_a_quiet_machine_join_the_nightly_trend(tmp_path):
    assert _on_the_trend(_row(tmp_path, "q", busy=0.1)) and _on_the_trend(_row(tmp_path, "u", busy=None))
    assert not _on_the_trend(_row(tmp_path, "b", busy=0.9))
    assert not _on_the_trend(_row(tmp_path, "h", busy=0.3))  # 0.6 of 2 CPUs taken: not busy, not quiet either


def test_tonights_row_of_a_cell_measured_again_is_its_fastest_process(tmp_path):
    """Another process only adds time: among tonight's processes of a cell, the row kept is the measured one with
    the lowest paired ratio (timed alone: the lowest p50); a process that measured nothing is never kept over one
    that did, and with none measured the last stands."""
    slow, fast = _row(tmp_path, "a", 0.0, slower=1.3), _row(tmp_path, "b", 0.0, seed=1)
    assert _fastest([slow, fast]) is fast and _fastest([fast, slow]) is fast
    lost = replace(slow, status=Status.WORKER_LOST, comparison=None, measurement=None)
    assert _fastest([lost, slow]) is slow and _fastest([lost]) is lost

    def paired(row, ratio):  # the paired ratio decides, not the p50 timed beside it
        p = PairedLatency.of([ratio] * 8, [1.0] * 8, "the PC baseline (keras)")
        return replace(row, measurement=replace(row.measurement, paired=p))

    banded, usual = paired(fast, 0.100), paired(slow, 0.080)
    assert _fastest([banded, usual]) is usual


def test_a_browser_renderers_peak_is_judged_against_a_comparable_load_and_a_process_delta_never_by_load(tmp_path):
    """A renderer's peak RSS is a garbage-collected heap's: under a CPU-bound job its collector runs later and the
    peak climbs (onnxruntime-web rows: +11% and +12% on identical nights of examples/lab.toml). It is judged as
    latency is; a host runtime's peak measured in its own process is judged whatever the load."""
    def mem(row, key, value):
        return replace(row, measurement=replace(row.measurement, memory_bytes={key: value}))

    peak = "renderer_peak_rss_bytes"
    quiet = mem(_row(tmp_path, "n1", busy=0.02), peak, 327.6e6)
    busy = mem(_row(tmp_path, "n2", busy=0.95, seed=1), peak, 363.8e6)
    got = _changes(quiet, busy)["memory"]
    assert got.outcome == "unclear" and not got.alert and "machine busy" in got.detail and "+11.1%" in got.detail
    # a peak that really grew on the busy night is flagged on the next quiet one, against the last quiet night
    later = mem(_row(tmp_path, "n3", busy=0.03, seed=2), peak, 363.8e6)
    got = _changes(busy, later, ref=latency_reference([("n1", quiet), ("n2", busy)], later, 0.5))["memory"]
    assert got.outcome == "regression" and got.alert and "against n1" in got.detail
    # the same figures from a host runtime's own process: load never excuses them
    delta = "isolated_peak_rss_delta_bytes"
    got = _changes(mem(quiet, delta, 327.6e6), mem(busy, delta, 363.8e6))["memory"]
    assert got.outcome == "regression" and got.alert
