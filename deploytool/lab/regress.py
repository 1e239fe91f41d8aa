"""Regression statistics for a lab cell across nights (issue 11's core): is
tonight worse than the last good night of the same cell, beyond noise?

- Accuracy: a paired exact test on per-sample correctness (McNemar's exact form:
  a one-sided binomial test on the discordant samples), plus a minimum drop in
  points — one sample out of 2,000 is not a regression.
- Latency: a rank test on the raw per-sample arrays, p = min(Mann-Whitney U,
  Kolmogorov-Smirnov) as Chromium's Pinpoint does, plus a minimum effect (at least
  5% on the median and at least k x the baseline's IQR). Between "different" and
  "same" lies "unclear": the lab re-measures that cell once before judging.
- Latency and the machine's load: a row says what other processes took of the
  CPUs just before its timing began (`MachineLoad`). When either night's row was
  timed on a busy machine (fewer CPUs free than the row's threads), or the two
  loads differ by half a CPU or more, a latency change is confounded with the
  load: it is "unclear (machine busy: ...)", never a regression or an improvement.
  Accuracy, memory, size and status are not judged by load.
- Paired latency (issue 25): a host row timed against the PC baseline in
  alternating blocks carries a ratio that cancels the machine's drift. Its
  change is judged on the block ratios (Mann-Whitney on their logs), the two
  nights' bootstrap intervals (they must not overlap) and a minimum effect that
  is at least NOISE_K x the host's process-to-process spread of that ratio
  (from the cell's earlier nights, or from tonight's processes when the lab
  measured it again): a change a new process alone could make never alerts.
  A cell whose latency changed is measured again in new processes (up to
  `latency_measure_again`), and tonight's row is the fastest of them: another
  process only ever adds time.
- Memory and size: relative thresholds.
- Status changes: newly failing, fixed.
- Across nights: E-divisive (Matteson & James 2014: energy-distance change points,
  significance by permutation) on a cell's nightly medians. A step whose new
  segment is still short is "suspicious"; once it has lasted `min_segment` nights
  it is a regression.
Pure functions of arrays: no store, no clock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from deploytool.latency import PairedLatency
from deploytool.value import value

DIFFERENT_P = 0.01  # Pinpoint's "different"
SAME_P = 0.10  # above this the arrays are "the same"; between the two: unclear, measure again
# Two rows' loads differ "materially" from this many CPUs' worth of other processes' work apart: half a core
# is what one more busy thread of the runtime's own would take from a 1-thread row.
LOAD_DIFFERENCE_CPUS = 0.5


@value
class Change:
    metric: str
    outcome: str  # "regression", "improvement", "same", "unclear", "newly_failing", "fixed", "suspicious"
    detail: str
    p_value: float | None = None
    effect: float | None = None  # relative change (or points for accuracy)

    @property
    def alert(self) -> bool:
        return self.outcome in ("regression", "newly_failing")


@value
class MachineLoad:
    """What other processes took of the machine over the moment before a row's latency timing began
    (deploytool.runtimes.measure.cpu_busy_fraction), and what the row needed of it."""

    others_fraction: float  # share of all CPUs busy with other processes, 0..1
    cpus: int
    threads: int  # the runtime's threads: the CPUs the row's timing needs free

    @property
    def others_cpus(self) -> float:
        return self.others_fraction * self.cpus

    @property
    def busy(self) -> bool:
        """Fewer CPUs free than the row's threads (the rule of the row's own "machine was busy" note)."""
        return (1.0 - self.others_fraction) * self.cpus < self.threads

    @property
    def quiet(self) -> bool:
        return not self.busy and self.others_cpus < LOAD_DIFFERENCE_CPUS

    def __str__(self) -> str:
        return f"{100 * self.others_fraction:.0f}% of {self.cpus} CPUs" + (" (busy)" if self.busy else "")

    @classmethod
    def of(cls, environment: dict[str, Any], default_cpus: int | None = None) -> MachineLoad | None:
        """From a row's environment; None for a row that did not record its load (older rows). A phone row
        whose runtime picked its own thread count ("default") needs at least one CPU free."""
        busy = environment.get("cpu_busy_fraction_before_timing")
        during = environment.get("cpu_busy_fraction_during_timing")
        if during is not None:  # watched while timing too (paired rows): the worse of the two
            busy = during if busy is None else max(float(busy), float(during))
        cpus = environment.get("cpu_count") or default_cpus
        if busy is None or not cpus:
            return None
        try:
            threads = int(environment.get("threads") or 1)
        except (TypeError, ValueError):
            threads = 1
        try:
            return cls(float(busy), int(cpus), max(threads, 1))
        except (TypeError, ValueError):
            return None


def load_confounds(before: MachineLoad | None, now: MachineLoad | None,
                   difference_cpus: float = LOAD_DIFFERENCE_CPUS) -> str:
    """Why a latency change between two rows may be the machine's load, not the model ("" when the loads are
    comparable, or not both known)."""
    if before is None or now is None:
        return ""
    if before.busy or now.busy or abs(before.others_cpus - now.others_cpus) >= difference_cpus:
        return f"machine busy: load {before} vs {now} (other processes' share of the CPUs before timing)"
    return ""


def accuracy_change(correct_before: np.ndarray, correct_now: np.ndarray, min_drop_points: float = 0.5,
                    alpha: float = DIFFERENT_P) -> Change:
    """Per-sample correctness (bool arrays over the same test set) of the last good night and tonight."""
    from scipy.stats import binomtest

    before, now = np.asarray(correct_before, bool), np.asarray(correct_now, bool)
    if before.shape != now.shape:
        raise ValueError(f"correctness arrays differ in length ({before.size} vs {now.size}): not the same test set")
    lost = int(np.sum(before & ~now))  # right before, wrong now
    gained = int(np.sum(~before & now))
    drop = 100.0 * (lost - gained) / max(before.size, 1)
    if lost + gained == 0:
        return Change("accuracy", "same", "no sample changed", 1.0, 0.0)
    worse = binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue
    better = binomtest(gained, lost + gained, 0.5, alternative="greater").pvalue
    detail = f"{lost} samples newly wrong, {gained} newly right ({-drop:+.2f} points)"
    if worse < alpha and drop >= min_drop_points:
        return Change("accuracy", "regression", detail, float(worse), -drop)
    if better < alpha and -drop >= min_drop_points:
        return Change("accuracy", "improvement", detail, float(better), -drop)
    return Change("accuracy", "same", detail, float(min(worse, better)), -drop)


def latency_change(before_ms: np.ndarray, now_ms: np.ndarray, min_relative: float = 0.05, k_iqr: float = 0.5,
                   different_p: float = DIFFERENT_P, same_p: float = SAME_P, load_before: MachineLoad | None = None,
                   load_now: MachineLoad | None = None, load_difference_cpus: float = LOAD_DIFFERENCE_CPUS) -> Change:
    """Raw per-sample latencies of the last good night and tonight, and the load each was timed under (None:
    not recorded, judged as before loads were known). A change under confounding loads is "unclear"."""
    c = _latency_change(before_ms, now_ms, min_relative, k_iqr, different_p, same_p)
    why = load_confounds(load_before, load_now, load_difference_cpus) if c.outcome != "same" else ""
    if not why:
        return c
    return Change("latency", "unclear", f"{why}; {c.detail.removesuffix('; measure again')}; not judged",
                  c.p_value, c.effect)


def _latency_change(before_ms: np.ndarray, now_ms: np.ndarray, min_relative: float, k_iqr: float,
                    different_p: float, same_p: float) -> Change:
    from scipy.stats import ks_2samp, mannwhitneyu

    a = np.asarray(before_ms, np.float64)
    b = np.asarray(now_ms, np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < 5 or b.size < 5:
        return Change("latency", "unclear", f"too few samples ({a.size}, {b.size})")
    p = float(min(mannwhitneyu(a, b, alternative="two-sided").pvalue, ks_2samp(a, b).pvalue))
    med_a, med_b = float(np.median(a)), float(np.median(b))
    rel = med_b / med_a - 1.0 if med_a > 0 else float("inf")
    q1, q3 = np.percentile(a, [25, 75])
    big = abs(rel) >= min_relative and abs(med_b - med_a) >= k_iqr * (q3 - q1)
    detail = f"p50 {med_a:.4g} -> {med_b:.4g} ms ({rel:+.1%}), p = {p:.2g}"
    if p <= different_p and big:
        return Change("latency", "regression" if rel > 0 else "improvement", detail, p, rel)
    if p > same_p or not big:
        return Change("latency", "same", detail, p, rel)
    return Change("latency", "unclear", detail + "; measure again", p, rel)


def paired_latency_change(before: PairedLatency, now: PairedLatency, min_relative: float = 0.05,
                          spread: float | None = None, k: float = 3.0, different_p: float = DIFFERENT_P,
                          same_p: float = SAME_P, processes: int | None = None) -> Change:
    """Two rows' paired latency (deploytool.latency): "regression"/"improvement" when the block ratios differ
    (Mann-Whitney on their logs, p <= different_p), the bootstrap intervals do not overlap, and the ratio moved
    by at least the larger of `min_relative` and `k` x `spread` (the host's process-to-process standard deviation
    of the log ratio; None: not known); "same" when p > same_p or the move is smaller; else "unclear".
    `processes`: how many processes `spread` was estimated from; the bar then uses its upper bound
    (spread_upper_bound), not the estimate itself."""
    from scipy.stats import mannwhitneyu

    a, b = np.log(before.ratios), np.log(now.ratios)
    if a.size < 5 or b.size < 5 or not (before.ratio > 0 and now.ratio > 0):
        return Change("latency", "unclear", f"too few paired blocks ({a.size}, {b.size})")
    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    step = float(np.log(now.ratio / before.ratio))
    rel = float(np.expm1(step))
    floor, bound = spread_bar(spread, processes, k, min_relative)
    big = abs(step) >= np.log1p(floor)
    apart = now.ratio_low > before.ratio_high or now.ratio_high < before.ratio_low
    detail = (f"paired ratio to the PC baseline {before.ratio:.3g}x [{before.ratio_low:.3g}, {before.ratio_high:.3g}]"
              f" -> {now.ratio:.3g}x [{now.ratio_low:.3g}, {now.ratio_high:.3g}] ({rel:+.1%}), p = {p:.2g}; "
              f"needs {floor:.0%}")
    if spread and processes:
        detail += (f" ({k:g} x {bound:.1%}, the 95% upper bound of the host's process-to-process spread "
                   f"{spread:.1%} over {processes} processes)")
    elif spread:
        detail += f" ({k:g} x the host's process-to-process spread {spread:.1%})"
    if p <= different_p and apart and big:
        return Change("latency", "regression" if step > 0 else "improvement", detail, p, rel)
    if p > same_p or not big:
        return Change("latency", "same", detail, p, rel)
    return Change("latency", "unclear", detail + "; measure again", p, rel)


# How sure the bar of a latency change is about the spread it is built on: a spread estimated from few processes
# (two measurements tonight, three earlier nights) is replaced by its one-sided upper confidence bound. Two
# processes that happened to agree to 0.2% say little: on examples/lab.toml a quiet night's LiteRT row moved
# +5.5% against a bar of 3 x 0.2% and was flagged although nothing had changed.
SPREAD_CONFIDENCE = 0.95


def spread_upper_bound(sd: float, processes: int, confidence: float = SPREAD_CONFIDENCE) -> float:
    """The one-sided `confidence` upper bound of a standard deviation `sd` estimated from `processes` values:
    sd x sqrt(df / chi2.ppf(1 - confidence, df)) with df = processes - 1 (x15.9 for two processes, x4.4 for
    three, x2.1 for six at 95%)."""
    from scipy.stats import chi2

    df = processes - 1
    if df < 1:
        raise ValueError(f"a spread needs at least two processes, got {processes}")
    return float(sd * np.sqrt(df / chi2.ppf(1.0 - confidence, df)))


def spread_bar(spread: float | None, processes: int | None, k: float, min_relative: float = 0.0
               ) -> tuple[float, float | None]:
    """The smallest relative move a latency change must make, max(min_relative, e^(k x bound) - 1), and `bound`:
    the spread (a standard deviation of log latency) at its upper bound when the number of `processes` it came
    from is known, else the spread itself (None: not known, no bar beyond min_relative)."""
    bound = spread_upper_bound(spread, processes) if spread and processes else spread
    return max(min_relative, float(np.expm1(k * bound)) if bound else 0.0), bound


def beyond_tonights_processes(c: Change, others_p50: Sequence[float], p50: float, k: float = 3.0) -> Change:
    """A regression of a row timed alone whose cell has too few earlier nights to say its night-to-night spread:
    it must exceed `k` x the 95% upper bound of the spread between tonight's processes (`others_p50`, the cell's
    other measurements tonight, and `p50`, the one judged), as a paired row's must; before a second measurement it
    is unclear."""
    values = [float(v) for v in others_p50 if v > 0]
    if not values or not p50 > 0:
        return replace(c, outcome="unclear", detail=f"{c.detail}; timed alone and the cell's night-to-night "
                                                     "spread is not known yet: measure again in a new process")
    logs = [float(np.log(v)) for v in [*values, p50]]
    floor, bound = spread_bar(tonights_spread(logs), len(logs), k)
    said = (f"{k:g} x {bound or 0.0:.1%}, the 95% upper bound of the spread of tonight's {len(logs)} processes "
            f"(p50 {', '.join(f'{v:.4g}' for v in values)} and {p50:.4g} ms)")
    if c.effect is not None and c.effect < floor:
        return replace(c, outcome="same", detail=f"{c.detail}; not judged a change: within {said}")
    return replace(c, detail=f"{c.detail}; beyond {said}")


def process_spread(log_ratios: list[float]) -> float | None:
    """The host's process-to-process standard deviation of a cell's log paired ratio: 1.4826 x MAD over 3 or more
    processes (earlier nights), |a - b| / sqrt(2) for two (tonight's two measurements); None for fewer."""
    x = np.asarray([v for v in log_ratios if np.isfinite(v)], np.float64)
    if x.size >= NOISE_MIN_NIGHTS:
        return float(1.4826 * np.median(np.abs(x - np.median(x))))
    if x.size == 2:
        return float(abs(x[0] - x[1]) / np.sqrt(2))
    return None


def tonights_spread(log_values: Sequence[float]) -> float | None:
    """The spread of one cell's processes measured tonight (its first measurement and those again): the sample
    standard deviation of their logs (|a - b| / sqrt(2) for two), None for fewer than two. Not the MAD of
    earlier nights: among a few processes, one in a runtime's slower band is the spread, not an outlier."""
    x = np.asarray([v for v in log_values if np.isfinite(v)], np.float64)
    return float(np.std(x, ddof=1)) if x.size >= 2 else None


# Night-to-night noise: a cell measured in a new process each night moves by more than one process's own
# per-sample spread (idle, LiteRT LeNet-5 at ~25-30 us: nightly medians 0.022-0.033 ms with nothing changed), so
# the rank test between two nights' arrays calls such a move "different". Like Perfherder and Chromium's
# dashboard, which judge a night against the spread of earlier nights, a pairwise change whose median stays
# within NOISE_K robust standard deviations (1.4826 x MAD) of the earlier nights' medians is not a change.
NOISE_K = 3.0
NOISE_MIN_NIGHTS = 3


def within_nightly_noise(earlier_medians: list[float], now_median: float, k: float = NOISE_K,
                         min_nights: int = NOISE_MIN_NIGHTS) -> str:
    """Why tonight's median is within the cell's night-to-night spread ("" when it is not, or when fewer than
    `min_nights` earlier nights say what the spread is)."""
    x = np.asarray([v for v in earlier_medians if v is not None and np.isfinite(v)], np.float64)
    if len(x) < min_nights or not np.isfinite(now_median):
        return ""
    centre = float(np.median(x))
    sd = 1.4826 * float(np.median(np.abs(x - centre)))
    bound = spread_upper_bound(sd, len(x))  # a few nights' spread, at its upper bound
    if abs(now_median - centre) > k * bound:
        return ""
    return (f"within the cell's night-to-night spread: median {now_median:.4g} ms vs {centre:.4g} ± {k:g} x "
            f"{bound:.2g} ms (the 95% upper bound of the spread {sd:.2g} ms over {len(x)} earlier nights)")


def threshold_change(metric: str, before: float | None, now: float | None, max_relative: float) -> Change:
    """Memory or size: a relative increase beyond `max_relative` is a regression."""
    if before is None or now is None or not before:
        return Change(metric, "same", "not comparable")
    rel = now / before - 1.0
    detail = f"{before:.4g} -> {now:.4g} ({rel:+.1%})"
    if rel > max_relative:
        return Change(metric, "regression", detail, None, rel)
    if rel < -max_relative:
        return Change(metric, "improvement", detail, None, rel)
    return Change(metric, "same", detail, None, rel)


def status_change(failing_before: bool, failing_now: bool, status_now: str) -> Change:
    if failing_now and not failing_before:
        return Change("status", "newly_failing", f"now {status_now}")
    if failing_before and not failing_now:
        return Change("status", "fixed", f"now {status_now}")
    return Change("status", "same", status_now)


# -------------------------------------------------------------------- across nights: E-divisive
def _energy_statistic(x: np.ndarray, tau: int) -> float:
    """Matteson & James's scaled energy distance between x[:tau] and x[tau:] (alpha = 1)."""
    left, right = x[:tau], x[tau:]
    n, m = len(left), len(right)
    between = np.abs(left[:, None] - right[None, :]).mean()
    within_l = np.abs(left[:, None] - left[None, :]).sum() / max(n * (n - 1), 1)
    within_r = np.abs(right[:, None] - right[None, :]).sum() / max(m * (m - 1), 1)
    return (n * m / (n + m)) * (2 * between - within_l - within_r)


def _best_split(x: np.ndarray, min_size: int) -> tuple[int, float]:
    best, best_q = -1, -np.inf
    for tau in range(min_size, len(x) - min_size + 1):
        q = _energy_statistic(x, tau)
        if q > best_q:
            best, best_q = tau, q
    return best, float(best_q)


def change_points(values: list[float] | np.ndarray, min_size: int = 2, alpha: float = 0.05,
                  permutations: int = 199, seed: int = 0) -> list[int]:
    """Indices where a new segment starts (E-divisive, binary segmentation, permutation test at `alpha`)."""
    x = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    found: list[int] = []

    def split(lo: int, hi: int) -> None:
        seg = x[lo:hi]
        if len(seg) < 2 * min_size:
            return
        tau, q = _best_split(seg, min_size)
        if tau < 0:
            return
        exceed = sum(_best_split(rng.permutation(seg), min_size)[1] >= q for _ in range(permutations))
        if (exceed + 1) / (permutations + 1) > alpha:
            return
        found.append(lo + tau)
        split(lo, lo + tau)
        split(lo + tau, hi)

    split(0, len(x))
    return sorted(found)


def trend(nightly: list[float], min_segment: int = 3, min_relative: float = 0.05) -> Change:
    """The latest step in a cell's nightly values (higher = worse, e.g. p50 ms): "regression" once the new level
    has held `min_segment` nights, "suspicious" while it is younger, "same" when there is no step at the end."""
    x = np.asarray(nightly, np.float64)
    if len(x) < 4:
        return Change("trend", "same", "too few nights")
    cps = change_points(x, min_size=1 if len(x) < 8 else 2)
    if not cps:
        return Change("trend", "same", f"no change point in {len(x)} nights")
    start = cps[-1]
    before, after = float(np.median(x[:start][-10:])), float(np.median(x[start:]))
    rel = after / before - 1.0 if before else 0.0
    if abs(rel) < min_relative:
        return Change("trend", "same", f"a step at night {start} of only {rel:+.1%}", None, rel)
    held = len(x) - start
    if rel < 0:
        return Change("trend", "improvement", f"down {rel:+.1%} since night {start}", None, rel)
    outcome = "regression" if held >= min_segment else "suspicious"
    return Change("trend", outcome, f"up {rel:+.1%} since night {start} ({held} night(s))", None, rel)
