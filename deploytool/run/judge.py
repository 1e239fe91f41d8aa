"""The pure judge: a runtime's `Outputs` and the PC baseline -> `Comparison`
(accuracy, agreement, flips, errors, ratios, verdict) and `Measurement`. No
files, no store, no clock: the same inputs always give the same judgement."""

from __future__ import annotations

import numpy as np

from deploytool.latency import PairedLatency
from deploytool.result import Comparison, Measurement
from deploytool.run.baseline import Baseline
from deploytool.data.feed import split
from deploytool.run.compare import compare, compare_outputs
from deploytool.runtimes.base import Outputs


def measurement_of(outputs: Outputs, paired: PairedLatency | None = None) -> Measurement:
    lat = outputs.latency
    return Measurement(p50_ms=lat.p50_ms, p90_ms=lat.p90_ms, p99_ms=lat.p99_ms, mean_ms=lat.mean_ms,
                       latency_samples=lat.n, memory_bytes=dict(outputs.memory_bytes), load_ms=outputs.load_ms,
                       first_inference_ms=outputs.first_inference_ms, throughput_sps=outputs.throughput_sps,
                       latency_inferences_per_reading=outputs.inferences_per_reading, paired=paired)


def paired_ratios(c: Comparison, paired: PairedLatency | None) -> Comparison:
    """A row timed against the baseline in alternating blocks: its latency ratios are those of the blocks (the
    stored baseline's p50 was timed in another process, at another moment)."""
    if paired is not None and np.isfinite(paired.ratio):
        c.latency_ratio_p50 = paired.ratio
        c.latency_ratio_ci = (paired.ratio_low, paired.ratio_high)
        c.latency_ratio_p90 = (paired.target_p90_ms / paired.reference_p90_ms
                               if paired.reference_p90_ms > 0 else None)
    return c


def judge(outputs: Outputs, baseline: Baseline, y_true: np.ndarray, tolerances: dict[str, tuple[float, float]],
          size_bytes: int, task: str = "classification", paired: PairedLatency | None = None,
          scored: str = "", integer_outputs: tuple[str, ...] = ()) -> tuple[Comparison, Measurement]:
    """Compare one combination's outputs with its baseline under `tolerances`, as `task` asks: every output of
    a model with a signature, the class scores of an image classifier. `paired`: the row's latency timed against
    the baseline's model in alternating blocks, which then gives the latency ratios."""
    m = measurement_of(outputs, paired)
    named = baseline.named_outputs()
    if named is not None:
        if outputs.output_layout is None:
            raise ValueError("the row's outputs carry no layout, the baseline's do")
        c = compare_outputs(split(outputs.outputs, outputs.output_layout), named,
                            y_true if len(y_true) else None, tolerances, task=task, scored=scored,
                            integer_outputs=integer_outputs,
                            latency_p50_ms=m.p50_ms, latency_p90_ms=m.p90_ms,
                            baseline_p50_ms=baseline.latency["p50_ms"], baseline_p90_ms=baseline.latency["p90_ms"],
                            memory_bytes=m.memory_bytes, baseline_memory_bytes=baseline.memory_bytes,
                            size_bytes=size_bytes, baseline_size_bytes=baseline.size_bytes)
        return paired_ratios(c, paired), m
    c = compare(outputs.outputs, baseline.outputs(), y_true, tolerances,
                latency_p50_ms=m.p50_ms, latency_p90_ms=m.p90_ms,
                baseline_p50_ms=baseline.latency["p50_ms"], baseline_p90_ms=baseline.latency["p90_ms"],
                memory_bytes=m.memory_bytes, baseline_memory_bytes=baseline.memory_bytes,
                size_bytes=size_bytes, baseline_size_bytes=baseline.size_bytes)
    return paired_ratios(c, paired), m
