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

from deploytool.data.feed import Feed
from deploytool.value import value

Predict = Callable[[Feed], Feed]  # a runtime's one path (Runtime.predict_feed): named inputs to named outputs

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


def inferences_per_reading(one_inference_s: float, reading_s: float = READING_TARGET_S) -> int:
    """K, the batch-1 inferences timed by one timer reading: 1 for an inference of SHORT_INFERENCE_S or
    more, else enough for a reading of about `reading_s` (at most MAX_PER_READING)."""
    if not math.isfinite(one_inference_s) or one_inference_s >= SHORT_INFERENCE_S:
        return 1
    return int(min(MAX_PER_READING, math.ceil(reading_s / max(one_inference_s, 1e-9))))


def readings_for(samples: int, k: int) -> int:
    """How many readings of K inferences stand for `samples` batch-1 latencies: about the same number of
    inferences in all, but never fewer than MIN_READINGS (or `samples`, when fewer were asked)."""
    return max(math.ceil(samples / k), min(samples, MIN_READINGS))


# A row's batch-1 timing (one reading per test sample unless told) stops at about this many seconds: 5,000 samples
# of a 11 ms model would take a minute where 1,800 readings say as much of its percentiles (issue 38).
LATENCY_BUDGET_S = 20.0


def readings_within(readings: int, one_reading_s: float, budget_s: float | None = None) -> int:
    """`readings`, or fewer when they would take longer than `budget_s` (LATENCY_BUDGET_S) at `one_reading_s`
    each: as many as fit, never fewer than MIN_READINGS (nor more than asked)."""
    if not math.isfinite(one_reading_s) or one_reading_s <= 0:
        return readings
    budget = LATENCY_BUDGET_S if budget_s is None else budget_s
    return min(readings, max(MIN_READINGS, int(budget // one_reading_s)))


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


# The whole-set pass's inputs per call, at most (a batch holds fewer samples than the runtime's batch_size when its
# samples are large). 224x224x3 float images are 588 KiB each: 27 per batch. At 256 per batch (150 MiB) onnxruntime
# ran a small convnet at 0.68 ms a sample against 0.52 at 32, and its memory planner, which lays out a batch shape's
# buffers on its third run, made the row's peak grow with the number of samples (609 -> 914 MiB at 500 -> 5,000
# images; 165 MiB at both with 32 per batch; bench/bench_real_size.py).
WHOLE_SET_BATCH_BYTES = 16 * 2**20


def whole_set_batch(inputs: Feed, most: int) -> int:
    """The batch of the whole-set pass: at most `most` samples and WHOLE_SET_BATCH_BYTES of inputs (one sample at
    least)."""
    per_sample = inputs.nbytes // max(len(inputs), 1)
    return max(1, min(int(most), WHOLE_SET_BATCH_BYTES // max(per_sample, 1)))


def run_batched(predict: Predict, inputs: Feed, batch_size: int) -> tuple[Feed, float]:
    """The named outputs for the whole set in batches (Feed.batches: a set in a file is read a batch at a time into
    one buffer; each batch's outputs are the runtime's own arrays); returns (outputs, seconds)."""
    t0 = time.perf_counter()
    outputs = [predict(chunk) for chunk in inputs.batches(batch_size)]
    return Feed.concat(outputs), time.perf_counter() - t0


def time_batch1(predict: Predict, inputs: Feed, warmup_runs: int,
                samples: int | None) -> tuple[np.ndarray, float, int]:
    """Feed-1 latency of every sample (or the first `samples`), in ms; without a count, of as many samples as
    LATENCY_BUDGET_S holds at the warm-up's speed (`readings_within`: a real-size model on a large test set).

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
    fastest = float(warm.min()) if warmup_runs else first_ms / 1e3
    k = inferences_per_reading(fastest) if warmup_runs else 1
    if k == 1:
        n = readings_within(n, fastest) if samples is None else n  # a count the user asked for is kept
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


# ------------------------------------------------------------------ paired timing (issue 25)
# A target and a reference timed in PAIR_BLOCKS blocks; within a block their readings (K inferences each, as above)
# alternate one by one, at least PAIR_READINGS of each and about PAIR_BLOCK_S in all, the target first in even
# blocks and the reference first in odd ones, so whatever the machine does meanwhile falls on both alike. A block's
# figure for each side is the PAIR_QUANTILE of its readings: a reading only ever gains time from another process
# preempting it, so a low quantile is what both sides' code cost in that block. Each reading follows
# PAIR_WARM_INFERENCES untimed inferences of its own side: without them a side pays for the other having just run
# (TensorFlow's pool thread parks while a 1 ms LiteRT reading runs, and the Keras reading after it took 0.44-0.65 ms
# instead of 0.38-0.39 ms). One is not always enough: after a Keras reading, onnxruntime's LeNet-5 read 0.040 ms
# instead of 0.032 in 4 processes of 14 with one, and 0.030-0.032 ms in all 14 with three (alone in a process it
# reads 0.029-0.031 ms). 20 blocks of ~10-15 ms: ~0.2-0.3 s a row.
# On a shared VM a co-tenant slows this machine for 0.1-3 s at a time, every workload by its own factor (LiteRT's
# LeNet-5 1.4x, Keras's 1.7x, onnxruntime's dynamic-int8 one 1.9x, measured together), so the ratio of blocks timed
# only then is 10-30% off the quiet one. A full timing therefore goes on past PAIR_BLOCKS, up to PAIR_MAX_BLOCKS,
# until PAIR_CLEAN_WANTED of its blocks are clean against the reference's floor (deploytool.latency: its fastest
# block in the rows timed before), and takes PAIR_FIRST_BLOCKS when the worker has no floor yet; a quick run
# (fewer blocks, see pair_blocks) is not extended.
PAIR_BLOCKS = 20
PAIR_FIRST_BLOCKS = 40
PAIR_MAX_BLOCKS = 60
PAIR_CLEAN_WANTED = 10
MIN_PAIR_BLOCKS = 5  # a quick run's (--latency-samples under 10 x PAIR_BLOCKS: one block per 10 samples asked)
PAIR_BLOCK_S = 10e-3
PAIR_READINGS = 8
PAIR_QUANTILE = 0.25
PAIR_WARM_INFERENCES = 3
# A paired reading of a short inference lasts about this long (K = PAIR_READING_S / one inference): long enough
# for perf_counter (~0.1 us), short enough that a block holds PAIR_READINGS pairs within PAIR_BLOCK_S.
PAIR_READING_S = 0.25e-3
# Real-size models (issue 38): the sizes above, made for sub-millisecond models, would time a 0.7 s inference for
# half an hour. A row's blocks, their readings and warm inferences are sized from the measured time of one inference
# so they fit in PAIR_BUDGET_S (`plan_pairing`): a model of a few ms takes the sizes above, well inside it; a longer
# one keeps its blocks (the units the ratio and its interval come from) and gives up readings per block, down to
# one, then blocks, down to MIN_PAIR_BLOCKS; one slower still is not paired (PairingTooLong). The warm-up before
# stops after PAIR_WARMUP_BUDGET_S once two inferences of a side are timed.
PAIR_BUDGET_S = 20.0
PAIR_WARMUP_BUDGET_S = 2.0
# From this inference time on, a reading has no untimed warm inferences before it: the time a side loses to the
# other having just run (0.06-0.27 ms for Keras's LeNet-5, see above) is under 3% of it, and the warm inferences
# would triple the cost of every reading.
PAIR_LONG_INFERENCE_S = 10e-3


class PairingTooLong(Exception):
    """One inference is too slow for even MIN_PAIR_BLOCKS blocks within the row's budget: the row is timed alone."""


@value
class PairPlan:
    """How one paired timing is sized (`plan_pairing`)."""

    blocks: int  # timed in any case
    max_blocks: int  # extended up to this while too few blocks are clean (== blocks: not extended)
    readings_per_block: int  # of each side
    warm_inferences: int  # untimed, before each reading
    budget_s: float
    limited: bool  # the budget cut the readings or blocks below what a short inference gets

    def why(self, target_s: float, reference_s: float) -> str:
        """Why this many blocks, for the row's sentence ("" when the budget did not bind)."""
        if not self.limited:
            return ""
        return (f"{self.readings_per_block} reading(s) per side per block, as one inference takes "
                f"{_seconds(target_s)}, the reference's {_seconds(reference_s)}, and a row's paired timing has "
                f"{self.budget_s:g} s")


def _seconds(s: float) -> str:
    return f"{s:.3g} s" if s >= 1 else f"{1e3 * s:.3g} ms"


def pair_warm_inferences(one_inference_s: float) -> int:
    """Untimed inferences before each reading: PAIR_WARM_INFERENCES, none from PAIR_LONG_INFERENCE_S on."""
    return 0 if math.isfinite(one_inference_s) and one_inference_s >= PAIR_LONG_INFERENCE_S else PAIR_WARM_INFERENCES


def plan_pairing(target_s: float, reference_s: float, k_target: int = 1, k_reference: int = 1,
                 blocks: int = PAIR_BLOCKS, max_blocks: int = 0, budget_s: float = PAIR_BUDGET_S,
                 block_s: float = PAIR_BLOCK_S) -> PairPlan:
    """The plan of a paired timing whose one inference takes `target_s` and `reference_s` seconds (K of them per
    reading), asked for `blocks` blocks, extended up to `max_blocks` (0: not extended): as asked (readings filling
    `block_s`, at least PAIR_READINGS) when that fits in `budget_s`; else fewer readings per block, down to one,
    then fewer blocks, down to MIN_PAIR_BLOCKS. Raises PairingTooLong when even that does not fit."""
    warm = pair_warm_inferences(max(target_s, reference_s))
    pair_s = max((k_target + warm) * target_s + (k_reference + warm) * reference_s, 1e-9)
    readings = max(PAIR_READINGS, math.ceil(block_s / pair_s))
    most = max(blocks, max_blocks)
    if most * readings * pair_s <= budget_s:
        return PairPlan(blocks, most, readings, warm, budget_s, False)
    pairs = int(budget_s // pair_s)  # reading pairs the budget holds
    readings = max(1, min(readings, pairs // blocks))
    fit = pairs // readings
    if fit < MIN_PAIR_BLOCKS:
        raise PairingTooLong(f"one inference takes {_seconds(target_s)} (the reference's {_seconds(reference_s)}): "
                             f"{MIN_PAIR_BLOCKS} blocks of one reading per side would take "
                             f"{MIN_PAIR_BLOCKS * pair_s:.0f} s, beyond a row's {budget_s:g} s of paired timing")
    return PairPlan(min(blocks, fit), min(most, fit), readings, warm, budget_s, True)


def pair_blocks(latency_samples: int | None) -> int:
    """How many blocks a row's paired timing takes: PAIR_BLOCKS, fewer (one per 10 samples, at least
    MIN_PAIR_BLOCKS) when the run asked for fewer than 10 x PAIR_BLOCKS latency samples."""
    if latency_samples is None:
        return PAIR_BLOCKS
    return max(MIN_PAIR_BLOCKS, min(PAIR_BLOCKS, int(latency_samples) // 10))


def per_cpu_ticks(text: str) -> dict[int, tuple[int, int]]:
    """(all ticks, idle + iowait ticks) of each `cpuN` line of /proc/stat's text."""
    out = {}
    for line in text.splitlines():
        name = line.split(maxsplit=1)[0] if line.strip() else ""
        if name.startswith("cpu") and name[3:].isdigit():
            t = _cpu_ticks("cpu " + line.split(maxsplit=1)[1])
            if t is not None:
                out[int(name[3:])] = t
    return out


def least_busy_cpus(count: int, interval_s: float = LOAD_CHECK_S) -> tuple[int, ...]:
    """The `count` CPUs of this process's affinity that other processes used least over `interval_s` (this
    process sleeping); () where /proc/stat or affinity cannot be read, or when `count` covers them all."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return ()
    if count >= len(allowed):
        return ()
    stat = Path("/proc/stat")
    try:
        before = per_cpu_ticks(stat.read_text())
        time.sleep(interval_s)
        after = per_cpu_ticks(stat.read_text())
    except OSError:
        return ()

    def busy(cpu: int) -> float:
        a, b = before.get(cpu), after.get(cpu)
        if a is None or b is None or b[0] <= a[0]:
            return 1.0
        return 1.0 - (b[1] - a[1]) / (b[0] - a[0])

    return tuple(sorted(sorted(allowed, key=lambda c: (busy(c), c))[:count]))


def others_busy_fraction(stat_before: str, stat_after: str, own_cpu_s: float, wall_s: float,
                         cpus: int) -> float | None:
    """The share of all CPUs other processes took over a span in which this process used `own_cpu_s` seconds of
    CPU: all CPUs' busy share minus this process's own (never below 0). None when /proc/stat said nothing."""
    busy = busy_fraction_between(stat_before, stat_after)
    if busy is None or wall_s <= 0 or cpus <= 0:
        return None
    return min(1.0, max(0.0, busy - own_cpu_s / (wall_s * cpus)))


def _warm_up(predict: Predict, rows: list, warmup_runs: int) -> float:
    """The fastest of the warm-up inferences (at least 3; past PAIR_WARMUP_BUDGET_S, no more once two ran)."""
    warm: list[float] = []
    start = time.perf_counter()
    for i in range(max(warmup_runs, 3)):
        t = time.perf_counter()
        predict(rows[i % len(rows)])
        warm.append(time.perf_counter() - t)
        if len(warm) >= 2 and time.perf_counter() - start > PAIR_WARMUP_BUDGET_S:
            break
    return min(warm)


def time_paired(target: Predict, reference: Predict, target_inputs: Any, reference_inputs: Any,
                warmup_runs: int = 10, blocks: int = PAIR_BLOCKS,
                block_s: float = PAIR_BLOCK_S, max_blocks: int = 0,
                enough: Callable[[list[float], list[float]], bool] | None = None,
                budget_s: float = PAIR_BUDGET_S) -> dict[str, Any]:
    """Time `target` and `reference` (batch 1, the same samples in turn) in `blocks` blocks of alternating readings,
    then in more blocks, up to `max_blocks` in all, while `enough(target figures, reference figures)` is false; the
    blocks and readings as `plan_pairing` sizes them for `budget_s` (PairingTooLong: not even the fewest fit).

    Returns {"target_block_ms", "reference_block_ms": each block's PAIR_QUANTILE reading, "target_ms",
    "reference_ms": every reading, "readings_per_block", "k": (target K, reference K), "plan": the PairPlan,
    "one_inference_s": (target's, reference's) from the trial reading}; a reading is ms per inference (K
    inferences per reading when one is under SHORT_INFERENCE_S).
    """
    n = min(len(target_inputs), len(reference_inputs))
    t_rows = [target_inputs[i : i + 1] for i in range(n)]
    r_rows = [reference_inputs[i : i + 1] for i in range(n)]
    t_fast, r_fast = _warm_up(target, t_rows, warmup_runs), _warm_up(reference, r_rows, warmup_runs)
    kt, kr = inferences_per_reading(t_fast, PAIR_READING_S), inferences_per_reading(r_fast, PAIR_READING_S)
    sides = {"target": (target, t_rows, kt), "reference": (reference, r_rows, kr)}
    warm = pair_warm_inferences(max(t_fast, r_fast))
    # one trial reading of each side says what a reading costs once the other side has run
    one: dict[str, float] = {}
    for name, (fn, rows, k) in sides.items():
        t = time.perf_counter()
        for i in range(k + warm):  # a reading's K inferences and its untimed warm ones
            fn(rows[i % n])
        one[name] = (time.perf_counter() - t) / (k + warm)
    plan = plan_pairing(one["target"], one["reference"], kt, kr, blocks, max_blocks if enough is not None else 0,
                        budget_s, block_s)
    per_block = plan.readings_per_block
    readings: dict[str, list[float]] = {"target": [], "reference": []}
    figures: dict[str, list[float]] = {"target": [], "reference": []}
    cursor = {"target": 0, "reference": 0}
    b = 0
    while b < plan.blocks or (enough is not None and b < plan.max_blocks
                              and not enough(figures["target"], figures["reference"])):
        order = ("target", "reference") if b % 2 == 0 else ("reference", "target")
        b += 1
        block: dict[str, list[float]] = {"target": [], "reference": []}
        for _ in range(per_block):
            for name in order:
                fn, rows, k = sides[name]
                batch = [rows[(cursor[name] + i) % n] for i in range(k)]
                cursor[name] += k
                for _ in range(plan.warm_inferences):  # untimed: the reading starts warm, whatever the other side did
                    fn(batch[-1])
                t = time.perf_counter()
                for x in batch:
                    fn(x)
                block[name].append((time.perf_counter() - t) * 1e3 / k)
        for name in order:
            readings[name].extend(block[name])
            figures[name].append(float(np.quantile(block[name], PAIR_QUANTILE)))
    return {"target_block_ms": figures["target"], "reference_block_ms": figures["reference"],
            "target_ms": np.asarray(readings["target"]), "reference_ms": np.asarray(readings["reference"]),
            "readings_per_block": per_block, "k": (kt, kr), "plan": plan,
            "one_inference_s": (one["target"], one["reference"])}
