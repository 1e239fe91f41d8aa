"""The pure judge: a runtime's `Outputs` and the PC baseline's `Reference` -> `Comparison` (accuracy, agreement,
flips, errors, ratios, verdict) and `Measurement`. It takes values and reads nothing — no files, no store, no
clock (the import contract forbids them, directly or not): the same inputs always give the same judgement. The
caller reads the baseline (`Baseline.reference()`)."""

from __future__ import annotations


import numpy as np

from deploytool.data.feed import Feed, OutputLayout, split
from deploytool.latency import PairedLatency
from deploytool.result import Comparison, Measurement
from deploytool.run.compare import Costs, compare_outputs
from deploytool.runtimes.base import Outputs
from deploytool.value import value


SCORES = "output"  # the name an image classifier's one output is compared under


@value
class Reference:
    """What a row is judged against, as values: the PC baseline's outputs (side by side, split by `layout` for a
    model with a signature; one class-score array otherwise) and what the baseline cost."""

    outputs: np.ndarray
    layout: OutputLayout | None
    costs: Costs


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


def _named(stored: np.ndarray, layout: OutputLayout | None) -> Feed:
    """Stored outputs by name: split by their layout, or an image classifier's class scores as its one output."""
    stored = np.asarray(stored)
    return split(stored, layout if layout is not None else ((SCORES, tuple(stored.shape[1:])),))


def judge(outputs: Outputs, reference: Reference, y_true: np.ndarray, tolerances: dict[str, tuple[float, float]],
          size_bytes: int, task: str = "classification", paired: PairedLatency | None = None,
          scored: str = "", integer_outputs: tuple[str, ...] = (),
          quantized: bool = False) -> tuple[Comparison, Measurement]:
    """Compare one combination's outputs with its baseline's under `tolerances`, as `task` asks: every output of
    a model with a signature, the class scores of an image classifier. `paired`: the row's latency timed against
    the baseline's model in alternating blocks, which then gives the latency ratios. `quantized`: the row is
    judged by the quantized group's limits (what a weak test set's output error and cosine are held to)."""
    m = measurement_of(outputs, paired)
    costs = Costs(m.p50_ms, m.p90_ms, m.memory_bytes, size_bytes)
    if reference.layout is not None and outputs.output_layout is None:
        raise ValueError("the row's outputs carry no layout, the baseline's do")
    c = compare_outputs(_named(outputs.outputs, outputs.output_layout), _named(reference.outputs, reference.layout),
                        y_true if len(y_true) else None, tolerances, task=task, scored=scored,
                        integer_outputs=integer_outputs, costs=costs, baseline_costs=reference.costs,
                        quantized=quantized)
    return paired_ratios(c, paired), m
