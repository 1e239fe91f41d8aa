"""The pure judge: a runtime's `Outputs` and the PC baseline -> `Comparison`
(accuracy, agreement, flips, errors, ratios, verdict) and `Measurement`. No
files, no store, no clock: the same inputs always give the same judgement."""

from __future__ import annotations

import numpy as np

from deploytool.result import Comparison, Measurement
from deploytool.run.baseline import Baseline
from deploytool.data.feed import split
from deploytool.run.compare import compare, compare_outputs
from deploytool.runtimes.base import Outputs


def measurement_of(outputs: Outputs) -> Measurement:
    lat = outputs.latency
    return Measurement(p50_ms=lat.p50_ms, p90_ms=lat.p90_ms, p99_ms=lat.p99_ms, mean_ms=lat.mean_ms,
                       latency_samples=lat.n, memory_bytes=dict(outputs.memory_bytes), load_ms=outputs.load_ms,
                       first_inference_ms=outputs.first_inference_ms, throughput_sps=outputs.throughput_sps,
                       latency_inferences_per_reading=outputs.inferences_per_reading)


def judge(outputs: Outputs, baseline: Baseline, y_true: np.ndarray, tolerances: dict[str, tuple[float, float]],
          size_bytes: int, task: str = "classification") -> tuple[Comparison, Measurement]:
    """Compare one combination's outputs with its baseline under `tolerances`, as `task` asks: every output of
    a model with a signature, the class scores of an image classifier."""
    m = measurement_of(outputs)
    named = baseline.named_outputs()
    if named is not None:
        if outputs.output_layout is None:
            raise ValueError("the row's outputs carry no layout, the baseline's do")
        c = compare_outputs(split(outputs.outputs, outputs.output_layout), named,
                            y_true if len(y_true) else None, tolerances, task=task,
                            latency_p50_ms=m.p50_ms, latency_p90_ms=m.p90_ms,
                            baseline_p50_ms=baseline.latency["p50_ms"], baseline_p90_ms=baseline.latency["p90_ms"],
                            memory_bytes=m.memory_bytes, baseline_memory_bytes=baseline.memory_bytes,
                            size_bytes=size_bytes, baseline_size_bytes=baseline.size_bytes)
        return c, m
    c = compare(outputs.outputs, baseline.outputs(), y_true, tolerances,
                latency_p50_ms=m.p50_ms, latency_p90_ms=m.p90_ms,
                baseline_p50_ms=baseline.latency["p50_ms"], baseline_p90_ms=baseline.latency["p90_ms"],
                memory_bytes=m.memory_bytes, baseline_memory_bytes=baseline.memory_bytes,
                size_bytes=size_bytes, baseline_size_bytes=baseline.size_bytes)
    return c, m
