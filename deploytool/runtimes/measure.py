"""Measurement helpers shared by the in-process runtimes: per-sample latency at
batch 1 after warm-up, the whole-set batched run, and the process's peak RSS
during one combination. Nothing here knows about a framework; runtimes pass
plain callables.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable

import numpy as np

Predict = Callable[[np.ndarray], np.ndarray]

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
        return {key: float(peak), "process_peak_rss_delta_bytes": float(max(0, peak - self.rss_before_bytes))}


def run_batched(predict: Predict, inputs: np.ndarray, batch_size: int) -> tuple[np.ndarray, float]:
    """Outputs for the whole set in batches; returns (outputs, seconds)."""
    chunks = []
    t0 = time.perf_counter()
    for i in range(0, len(inputs), batch_size):
        chunks.append(np.asarray(predict(inputs[i : i + batch_size]), dtype=np.float32))
    seconds = time.perf_counter() - t0
    out = np.concatenate(chunks, axis=0)
    return out.reshape(len(inputs), -1), seconds


def time_batch1(predict: Predict, inputs: np.ndarray, warmup_runs: int, samples: int | None) -> tuple[np.ndarray, float]:
    """Latency of every sample (or the first `samples`) at batch 1, in ms.

    Returns (latencies_ms, first_inference_ms). The first call is timed apart:
    it often includes lazy initialisation that steady state does not pay.
    """
    n = len(inputs) if samples is None else min(samples, len(inputs))
    t0 = time.perf_counter()
    predict(inputs[0:1])
    first_ms = (time.perf_counter() - t0) * 1e3
    for i in range(warmup_runs):
        predict(inputs[i % len(inputs) : i % len(inputs) + 1])
    lat = np.empty(n, dtype=np.float64)
    for i in range(n):
        x = inputs[i : i + 1]
        t = time.perf_counter()
        predict(x)
        lat[i] = (time.perf_counter() - t) * 1e3
    return lat, first_ms
