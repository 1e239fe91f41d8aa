"""The sweep's arithmetic and its timing loop, with no framework in sight: a grid point is a list of batch
timings plus the process's CPU time and peak RSS over them, and this module turns that into per-sample p50/p90,
throughput and CPU utilisation. `time_point` times any `predict(batch) -> outputs` callable.

Definitions (pinned by tests/unit/test_study_sweep.py):
- per-sample latency of one batch = its wall time / its batch size; p50/p90 are over the point's batches
  (numpy's linear percentile), so at batch 1 they are the usual per-inference percentiles;
- throughput = samples run / the summed wall time of the timed batches;
- CPU utilisation = process CPU time (user + system) / wall time x 100: 100 is one core busy, 200 two.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from deploytool.data.feed import Feed
from deploytool.value import value


@value
class PointBudget:
    """How long one grid point runs: until it has `min_batches` batches and `min_samples` samples, or (once it
    has at least `floor_batches`) `max_seconds` have passed — so a pathologically slow point stays cheap."""

    min_batches: int = 5
    min_samples: int = 256
    max_seconds: float = 2.0
    floor_batches: int = 3
    warmup_batches: int = 2

    def done(self, batches: int, samples: int, seconds: float) -> bool:
        if batches >= self.min_batches and samples >= self.min_samples:
            return True
        return batches >= self.floor_batches and seconds >= self.max_seconds


def cpu_percent(cpu_seconds: float, wall_seconds: float) -> float | None:
    return 100.0 * cpu_seconds / wall_seconds if wall_seconds > 0 else None


def point_stats(batch_ms: Sequence[float], batch: int, cpu_seconds: float, wall_seconds: float) -> dict[str, float | int | None]:
    """The numbers of one grid point from its batch timings (ms per batch of `batch` samples)."""
    t = np.asarray(batch_ms, dtype=np.float64)
    if t.size == 0 or batch < 1:
        return {"batches": 0, "samples": 0, "p50_ms_per_sample": None, "p90_ms_per_sample": None,
                "mean_ms_per_sample": None, "throughput_sps": None, "cpu_percent": None}
    per_sample = t / batch
    p50, p90 = np.percentile(per_sample, [50, 90])
    total_s = float(t.sum()) / 1e3
    samples = int(t.size) * batch
    return {"batches": int(t.size), "samples": samples, "p50_ms_per_sample": float(p50),
            "p90_ms_per_sample": float(p90), "mean_ms_per_sample": float(per_sample.mean()),
            "throughput_sps": samples / total_s if total_s > 0 else None,
            "cpu_percent": cpu_percent(cpu_seconds, wall_seconds)}


def speedup(throughput_sps: float | None, reference_sps: float | None) -> float | None:
    """How many times the reference's throughput a point reaches (0.05 = twenty times slower)."""
    if not throughput_sps or not reference_sps:
        return None
    return throughput_sps / reference_sps


def batch_of(inputs: Feed, start: int, batch: int) -> Feed:
    """`batch` samples of the named inputs starting at `start`, wrapping around (a small sample set still fills
    batch 256)."""
    idx = (np.arange(batch) + start) % len(inputs)
    return inputs[idx].contiguous()


def cpu_seconds() -> float:
    """This process's CPU time, user + system, all threads (os.times() ticks at 10 ms: too coarse for a point)."""
    return time.process_time()


def time_point(predict: Callable[[Feed], object], inputs: Feed, batch: int,
               budget: PointBudget) -> tuple[list[float], float, float]:
    """Warm up, then time whole batches of `batch` until the budget is met.
    Returns (ms per batch, process CPU seconds, wall seconds) over the timed batches."""
    for i in range(budget.warmup_batches):
        predict(batch_of(inputs, i * batch, batch))
    times: list[float] = []
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    i = 0
    while not budget.done(len(times), len(times) * batch, time.perf_counter() - wall0):
        x = batch_of(inputs, i * batch, batch)  # built outside the timed span
        t = time.perf_counter()
        predict(x)
        times.append((time.perf_counter() - t) * 1e3)
        i += 1
    return times, cpu_seconds() - cpu0, time.perf_counter() - wall0
