"""Measurement helpers shared by the in-process runtimes: per-sample latency at
batch 1 after warm-up (K inferences per timer reading when one is too short
to time alone), the whole-set batched run, the machine's CPU load before
timing, and the process's peak RSS during one combination. Nothing here knows
about a framework; runtimes pass plain callables.
"""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from deploytool.data.feed import Batch, Feed

Predict = Callable[[Batch], Batch]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        m = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.M)
    except OSError:
        return None
    return int(m.group(1)) if m else None


class PeakRss:
    """Peak resident set size of this process between `start()` and `stop()`.

    On Linux, writing 5 to /proc/self/clear_refs resets VmHWM to the current RSS,
    so the high-water mark afterwards belongs to this span alone. Where that is
    not possible the figure is the process's lifetime peak, and `exact` says so.
    """

    def __init__(self) -> None:
        self.rss_before_bytes = 0
        self.exact = False

    def start(self) -> "PeakRss":
        try:
            _CLEAR_REFS.write_text("5")
            self.exact = True
        except OSError:
            self.exact = False
        self.rss_before_bytes = (_status_kib("VmRSS") or 0) * 1024
        return self

    def stop(self) -> dict[str, float]:
        peak = (_status_kib("VmHWM") or 0) * 1024
        key = "process_peak_rss_bytes" if self.exact else "process_lifetime_peak_rss_bytes"
        return {key: float(peak), "process_peak_rss_delta_bytes": memory_delta_bytes(self.rss_before_bytes, peak)}


def memory_delta_bytes(idle_rss_bytes: float, peak_rss_bytes: float) -> float:
    """What a span cost: its peak RSS above the RSS the process idled at just before it (never negative:
    a span that freed memory cost nothing)."""
    return float(max(0.0, float(peak_rss_bytes) - float(idle_rss_bytes)))


def release_free_memory() -> None:
    """Collect garbage and hand glibc's free pages back to the kernel, so the RSS an idle process shows
    does not depend on what the process ran before (a reused worker would otherwise look cheaper)."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figure is a little noisier, still honest
        pass


# Latency: one inference shorter than this is timed K at a time (a timer reading plus a Python call
# are a visible part of ~10 us); each reading then spans about READING_TARGET_S.
SHORT_INFERENCE_S = 50e-6
READING_TARGET_S = 1e-3
MAX_PER_READING = 1000
MIN_READINGS = 50


def inferences_per_reading(one_inference_s: float) -> int:
    """K, the batch-1 inferences timed by one timer reading: 1 for an inference of SHORT_INFERENCE_S or
    more, else enough for a reading of about READING_TARGET_S (at most MAX_PER_READING)."""
    if not math.isfinite(one_inference_s) or one_inference_s >= SHORT_INFERENCE_S:
        return 1
    return int(min(MAX_PER_READING, math.ceil(READING_TARGET_S / max(one_inference_s, 1e-9))))


def readings_for(samples: int, k: int) -> int:
    """How many readings of K inferences stand for `samples` batch-1 latencies: about the same number of
    inferences in all, but never fewer than MIN_READINGS (or `samples`, when fewer were asked)."""
    return max(math.ceil(samples / k), min(samples, MIN_READINGS))


# How long the load check watches /proc/stat before a row's timing: 20 ticks of 2 CPUs at 100 Hz, a 5% step,
# fine for the lab's rule (a row is busy when fewer CPUs than its threads were free).
LOAD_CHECK_S = 0.1


def _cpu_ticks(line: str) -> tuple[int, int] | None:
    """(all ticks, idle + iowait ticks) of /proc/stat's aggregate `cpu ` line; None for any other line."""
    fields = line.split()
    if not fields or fields[0] != "cpu":
        return None
    try:
        ticks = [int(v) for v in fields[1:]]
    except ValueError:
        return None
    if len(ticks) < 4:
        return None
    return sum(ticks), ticks[3] + (ticks[4] if len(ticks) > 4 else 0)


def busy_fraction_between(before: str, after: str) -> float | None:
    """The share of all CPUs busy between two readings of /proc/stat (its text; only the aggregate `cpu `
    line counts). None when either lacks it or no time passed. Any Linux's: this machine's, or a phone's."""
    def ticks(text: str) -> tuple[int, int] | None:
        return next((t for t in map(_cpu_ticks, text.splitlines()) if t is not None), None)

    a, b = ticks(before), ticks(after)
    if a is None or b is None or b[0] <= a[0]:
        return None
    return min(1.0, max(0.0, 1.0 - (b[1] - a[1]) / (b[0] - a[0])))


def cpu_busy_fraction(interval_s: float = LOAD_CHECK_S) -> float | None:
    """The share of all CPUs busy over `interval_s` (from /proc/stat), this process sleeping meanwhile:
    what other processes take. None where /proc/stat cannot be read."""
    stat = Path("/proc/stat")
    try:
        before = stat.read_text()
        time.sleep(interval_s)
        after = stat.read_text()
    except OSError:
        return None
    return busy_fraction_between(before, after)


def load_environment(busy_fraction: float | None, cpus: int | None = None) -> dict[str, Any]:
    """What a row records of the load its timing began under (the lab judges latency against it:
    deploytool.lab.regress.MachineLoad); nothing when it was not read. `cpus`: the CPUs of the machine that
    timed (a phone's), else this one's."""
    if busy_fraction is None:
        return {}
    return {"cpu_busy_fraction_before_timing": round(busy_fraction, 3), "cpu_count": cpus or os.cpu_count()}


def busy_note(busy_fraction: float | None, threads: int, cpus: int | None = None,
              where: str = "") -> str | None:
    """A note for the row when other processes left fewer free CPUs than the runtime's threads. `where`
    names another machine that timed (a phone) with `cpus` its CPUs; by default this one."""
    cpus = cpus or os.cpu_count() or 1
    if busy_fraction is None or (1.0 - busy_fraction) * cpus >= threads:
        return None
    # this machine's 1-minute load average says more; a phone's is not ours to read
    load = "" if where or not hasattr(os, "getloadavg") else f" (1-minute load {os.getloadavg()[0]:.1f})"
    return (f"{where or 'the machine'} was busy when timing began: {100 * busy_fraction:.0f}% of {cpus} CPUs "
            f"in use{load} for {threads} thread(s); latency may read high")


def run_batched(predict: Predict, inputs: Batch, batch_size: int) -> tuple[Batch, float]:
    """Outputs for the whole set in batches; returns (outputs, seconds): one (N, C) float32 array, or the named
    outputs (a Feed) of a model that has a signature."""
    feeds: list[Feed] = []
    arrays: list[np.ndarray] = []
    t0 = time.perf_counter()
    for i in range(0, len(inputs), batch_size):
        out = predict(inputs[i : i + batch_size])
        if isinstance(out, Feed):
            feeds.append(out)
        else:
            arrays.append(np.asarray(out, dtype=np.float32))
    seconds = time.perf_counter() - t0
    if feeds:
        return Feed.concat(feeds), seconds
    return np.concatenate(arrays, axis=0).reshape(len(inputs), -1), seconds


def time_batch1(predict: Predict, inputs: Batch, warmup_runs: int,
                samples: int | None) -> tuple[np.ndarray, float, int]:
    """Batch-1 latency of every sample (or the first `samples`), in ms.

    Returns (latencies_ms, first_inference_ms, k). The first call is timed
    apart: it often includes lazy initialisation that steady state does not
    pay. The warm-up runs are timed too; when the fastest is under
    SHORT_INFERENCE_S, each reading times K consecutive samples and is
    divided by K (see `inferences_per_reading`).
    """
    n = len(inputs) if samples is None else min(samples, len(inputs))
    t0 = time.perf_counter()
    predict(inputs[0:1])
    first_ms = (time.perf_counter() - t0) * 1e3
    warm = np.empty(warmup_runs, dtype=np.float64)
    for i in range(warmup_runs):
        x = inputs[i % len(inputs) : i % len(inputs) + 1]
        t = time.perf_counter()
        predict(x)
        warm[i] = time.perf_counter() - t
    # The fastest warm-up run, not the median: it is the model's own cost, so K stays the same between runs
    # on a busy machine (a K that flips between 1 and 21 moves p50 by itself).
    k = inferences_per_reading(float(warm.min())) if warmup_runs else 1
    if k == 1:
        lat = np.empty(n, dtype=np.float64)
        for i in range(n):
            x = inputs[i : i + 1]
            t = time.perf_counter()
            predict(x)
            lat[i] = (time.perf_counter() - t) * 1e3
        return lat, first_ms, 1
    rows = [inputs[i : i + 1] for i in range(n)]  # the same samples as K == 1 would time, in turn
    lat = np.empty(readings_for(n, k), dtype=np.float64)
    for j in range(len(lat)):
        batch = [rows[(j * k + i) % n] for i in range(k)]
        t = time.perf_counter()
        for x in batch:
            predict(x)
        lat[j] = (time.perf_counter() - t) * 1e3 / k
    return lat, first_ms, k
