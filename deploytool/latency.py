"""Paired latency (issue 25): a row's speed as a ratio to a reference timed
beside it. On a shared machine the CPU's own speed moves by 1.5x between
processes and between moments (bench/bench_machine_drift.py), so no absolute
p50 timed in well under a second repeats within 10%; a target and a reference
timed in alternating short blocks, in the same process and on the same CPU,
share that drift, and their ratio repeats. This module holds the value a
paired timing produces and the one definition of its statistics (the ratio,
its bootstrap confidence interval, the machine's drift during timing). Pure
functions of numbers: no runtime, no clock, no files.

Definitions (tests/unit/test_latency.py pins them by hand-computed cases):
- block i gives one target figure t_i and one reference figure r_i (a low
  quantile of its timer readings, which alternate target/reference: see
  deploytool.runtimes.measure.time_paired); its ratio is t_i / r_i;
- a block is clean when both its figures are within CLEAN_TOLERANCE of their
  side's fastest block (another process only ever adds time, and a side that
  hands work to a pool thread, as TensorFlow does, can lose whole blocks to a
  competing job while the other side keeps its speed); the reference's fastest
  is the lower of its fastest block here and its reference floor, the fastest
  block the same reference timed for the rows paired before this one in the
  same worker (the machine's quiet speed as the reference shows it: on a shared
  VM whole seconds go by in which a co-tenant slows every workload, each by its
  own factor, so a ratio timed only then is off by 10-30%); when fewer than
  MIN_CLEAN_BLOCKS blocks are clean, every block counts;
- the row's ratio is the median of the (clean) block ratios;
- its confidence interval is the percentile bootstrap over those blocks: blocks drawn
  with replacement (numpy's default_rng(BOOTSTRAP_SEED)), BOOTSTRAP_RESAMPLES
  times, the median of each draw, the (1 - CI_LEVEL)/2 and (1 + CI_LEVEL)/2
  quantiles (numpy's linear interpolation) of those medians;
- the machine's drift during timing is the largest reference block figure over
  the smallest: the reference did not change, so its spread is the machine's.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Sequence

import numpy as np

from deploytool.value import value

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CI_LEVEL = 0.95
CLEAN_TOLERANCE = 0.10
MIN_CLEAN_BLOCKS = 5


def block_ratios(target_block_ms: Sequence[float], reference_block_ms: Sequence[float]) -> np.ndarray:
    """t_i / r_i of each block (blocks where either median is not a positive finite number are left out)."""
    t = np.asarray(target_block_ms, np.float64)
    r = np.asarray(reference_block_ms, np.float64)
    if t.shape != r.shape:
        raise ValueError(f"{t.size} target blocks but {r.size} reference blocks: blocks come in pairs")
    ok = np.isfinite(t) & np.isfinite(r) & (t > 0) & (r > 0)
    return t[ok] / r[ok]


def clean_blocks(target_block_ms: Sequence[float], reference_block_ms: Sequence[float],
                 tolerance: float = CLEAN_TOLERANCE, reference_floor_ms: float = float("nan")) -> np.ndarray:
    """Which blocks are clean (a boolean per block): both figures positive, finite and within `tolerance` of
    their side's fastest block, the reference's fastest being at most `reference_floor_ms` (NaN: no floor)."""
    t = np.asarray(target_block_ms, np.float64)
    r = np.asarray(reference_block_ms, np.float64)
    ok = np.isfinite(t) & np.isfinite(r) & (t > 0) & (r > 0)
    if not ok.any():
        return ok
    r_fast = r[ok].min()
    if np.isfinite(reference_floor_ms) and reference_floor_ms > 0:
        r_fast = min(r_fast, float(reference_floor_ms))
    return ok & (t <= (1 + tolerance) * t[ok].min()) & (r <= (1 + tolerance) * r_fast)


def ratios_to_judge(target_block_ms: Sequence[float], reference_block_ms: Sequence[float],
                    reference_floor_ms: float = float("nan")) -> np.ndarray:
    """The block ratios a row's ratio and interval come from: the clean blocks' when there are at least
    MIN_CLEAN_BLOCKS of them, else every block's."""
    clean = clean_blocks(target_block_ms, reference_block_ms, reference_floor_ms=reference_floor_ms)
    if clean.sum() < MIN_CLEAN_BLOCKS:
        return block_ratios(target_block_ms, reference_block_ms)
    t = np.asarray(target_block_ms, np.float64)[clean]
    r = np.asarray(reference_block_ms, np.float64)[clean]
    return t / r


def ratio_of(ratios: Sequence[float] | np.ndarray) -> float:
    """The paired ratio: the median of the block ratios (NaN without any)."""
    x = np.asarray(ratios, np.float64)
    return float(np.median(x)) if x.size else float("nan")


def bootstrap_ci(ratios: Sequence[float] | np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = CI_LEVEL) -> tuple[float, float]:
    """The percentile bootstrap interval of `ratio_of` over blocks (see the module's definitions)."""
    x = np.asarray(ratios, np.float64)
    if x.size == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    draws = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def drift_of(reference_block_ms: Sequence[float]) -> float:
    """The machine's drift while timing: the largest reference block median over the smallest (1.0 = steady)."""
    r = np.asarray([v for v in reference_block_ms if np.isfinite(v) and v > 0], np.float64)
    return float(r.max() / r.min()) if r.size else float("nan")


def floor_of(reference_block_ms: Sequence[float], floor_ms: float = float("nan")) -> float:
    """The reference's floor once these blocks are timed: the fastest positive finite block figure, or `floor_ms`
    when lower (NaN when neither is a number)."""
    r = [float(v) for v in reference_block_ms if np.isfinite(v) and v > 0]
    if np.isfinite(floor_ms) and floor_ms > 0:
        r.append(float(floor_ms))
    return min(r) if r else float("nan")


def quiet_blocks(target_block_ms: Sequence[float], reference_block_ms: Sequence[float],
                 reference_floor_ms: float) -> int:
    """How many blocks are clean against the reference's floor: a timing with fewer than MIN_CLEAN_BLOCKS never
    saw the machine as quiet as the reference once ran on it, and its ratio is the busy machine's."""
    return int(clean_blocks(target_block_ms, reference_block_ms, reference_floor_ms=reference_floor_ms).sum())


@value
class PairedLatency:
    """A target and a reference timed in alternating blocks in one process: the row's latency ratio with its
    confidence interval, and the absolute medians of both measured in the same window."""

    target_block_ms: tuple[float, ...]  # the target's figure (ms per batch-1 inference) in each block
    reference_block_ms: tuple[float, ...]  # the reference's, in the same blocks
    reference: str  # what the reference was, in a reader's words ("the PC baseline (keras)")
    cpus: tuple[int, ...] = ()  # the CPUs both were pinned to (empty: not pinned)
    target_p50_ms: float = float("nan")  # of every target reading in the blocks
    target_p90_ms: float = float("nan")
    reference_p50_ms: float = float("nan")
    reference_p90_ms: float = float("nan")
    readings_per_block: int = 0
    # the share of all CPUs other processes took while the blocks were timed (None: not read)
    others_busy_fraction: float | None = None
    cpu_count: int = 0
    ratio: float = float("nan")
    ratio_low: float = float("nan")
    ratio_high: float = float("nan")
    drift: float = float("nan")
    clean: int = 0  # how many blocks the ratio comes from (all of them when too few were clean)
    # the reference's fastest block over the rows paired before this one in the same worker (NaN: none before)
    reference_floor_ms: float = float("nan")
    budget_s: float = float("nan")  # the seconds the row's blocks were sized to fit (issue 38; NaN: rows before)
    sized: str = ""  # why the row got fewer blocks or readings than a short inference gets ("": it did not)

    @classmethod
    def of(cls, target_block_ms: Sequence[float], reference_block_ms: Sequence[float], reference: str,
           **facts: Any) -> "PairedLatency":
        """The value with its statistics computed by this module's definitions."""
        ratios = ratios_to_judge(target_block_ms, reference_block_ms,
                                 float(facts.get("reference_floor_ms", float("nan"))))
        lo, hi = bootstrap_ci(ratios)
        return cls(tuple(float(v) for v in target_block_ms), tuple(float(v) for v in reference_block_ms), reference,
                   ratio=ratio_of(ratios), ratio_low=lo, ratio_high=hi, drift=drift_of(reference_block_ms),
                   clean=int(ratios.size), **facts)

    @property
    def blocks(self) -> int:
        return len(self.target_block_ms)

    @property
    def ratios(self) -> np.ndarray:
        """The block ratios the row's ratio comes from (see `ratios_to_judge`)."""
        return ratios_to_judge(self.target_block_ms, self.reference_block_ms, self.reference_floor_ms)

    def describe(self) -> str:
        """One sentence: how the row's latency was measured and how steady the machine was meanwhile."""
        where = (f" on CPU {self.cpus[0]}" if len(self.cpus) == 1 else
                 f" on CPUs {','.join(map(str, self.cpus))}" if self.cpus else "")
        load = ""
        if self.others_busy_fraction is not None and self.cpu_count:
            load = f"; other processes took {100 * self.others_busy_fraction:.0f}% of {self.cpu_count} CPUs"
        floor = (" (the reference's over the rows timed before it too)" if np.isfinite(self.reference_floor_ms)
                 and self.reference_floor_ms > 0 else "")
        used = (f", the ratio from the {self.clean} blocks where both were within {100 * CLEAN_TOLERANCE:.0f}% of "
                f"their fastest{floor}"
                if 0 < self.clean < self.blocks else "")
        sized = f" ({self.sized})" if self.sized else ""
        return (f"paired with {self.reference} in {self.blocks} alternating blocks{sized}{where}{used}: "
                f"{self.ratio:.3g}x [{self.ratio_low:.3g}, {self.ratio_high:.3g}] "
                f"(p50 {self.target_p50_ms:.4g} ms beside the reference's {self.reference_p50_ms:.4g} ms); "
                f"machine drift {self.drift:.2g}x during timing{load}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "PairedLatency | None":
        if not d:
            return None
        d = {k: (float("nan") if v is None and k in _FLOATS else v) for k, v in d.items() if k in _FIELDS}
        for k in ("target_block_ms", "reference_block_ms", "cpus"):
            d[k] = tuple(d.get(k) or ())
        return cls(**d)


_FIELDS = set(PairedLatency.__dataclass_fields__)
_FLOATS = ("target_p50_ms", "target_p90_ms", "reference_p50_ms", "reference_p90_ms", "ratio", "ratio_low",
           "ratio_high", "drift", "reference_floor_ms", "budget_s")


def unpaired_sentence(where: str, why: str, inferences_per_reading: int = 1) -> str:
    """The sentence of a row whose latency was timed alone (a browser, a phone, a runtime that could not be paired)."""
    k = f", {inferences_per_reading} inferences per timer reading" if inferences_per_reading > 1 else ""
    return (f"timed alone ({where}{k}), not paired: {why}; its ratio is against the PC baseline's p50 measured in "
            "another process, so the machine's drift between the two is in it")
