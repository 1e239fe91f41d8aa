"""Compare a target's outputs against the PC baseline of the same model and
data — accuracy and its delta, top-1 agreement, the flipped samples, output
error, latency / memory / size ratios — and judge them against the manifest's
tolerances, giving a `Comparison` (deploytool.result). Stateless functions over
value objects; it never runs a model.
"""

from __future__ import annotations

from dataclasses import field
from typing import Iterator, Mapping, Protocol

import numpy as np

from deploytool.errors import OutputMismatch, UnknownOption
from deploytool.result import MEMORY_PREFERENCE, Check, Comparison, OutputComparison
from deploytool.tasks import get_task
from deploytool.tasks.weak_set import weak_set_tolerances
from deploytool.tolerances import TOLERANCE_METRICS, tolerance_problem
from deploytool.value import value


@value
class Costs:
    """What one side of a comparison cost, as one value: its latency (p50, p90), its memory figures and its size.
    None where it was not measured (the ratio is then None)."""

    p50_ms: float | None = None
    p90_ms: float | None = None
    memory_bytes: Mapping[str, float] = field(default_factory=dict)
    size_bytes: int | None = None


NOT_MEASURED = Costs()


def judge(metric: str, value: float, limits: tuple[float, float]) -> Check:
    pass_limit, fail_limit = limits
    if TOLERANCE_METRICS[metric] == "min":
        outcome = "pass" if value >= pass_limit else ("degraded" if value >= fail_limit else "fail")
    else:
        outcome = "pass" if value <= pass_limit else ("degraded" if value <= fail_limit else "fail")
    return Check(metric, float(value), float(pass_limit), float(fail_limit), outcome)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b <= 0:
        return None
    return float(a) / float(b)


def memory_pair(target: dict[str, float], baseline: dict[str, float]) -> str | None:
    """The first figure both sides measured the same way; a ratio of unlike figures is no ratio."""
    for key in MEMORY_PREFERENCE:
        if target.get(key) is not None and baseline.get(key):
            return key
    return None


def cosine_per_sample(target: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Cosine similarity of each sample's flattened output with the reference's; two all-zero samples agree
    (1.0), an all-zero sample against a non-zero one does not (0.0), and a non-finite value gives NaN."""
    t = np.asarray(target, np.float64).reshape(len(target), -1)
    r = np.asarray(reference, np.float64).reshape(len(reference), -1)
    norms = np.linalg.norm(t, axis=1) * np.linalg.norm(r, axis=1)
    dots = np.einsum("ij,ij->i", t, r)
    both_zero = (np.linalg.norm(t, axis=1) == 0) & (np.linalg.norm(r, axis=1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), np.where(both_zero, 1.0, 0.0))
    finite = np.isfinite(t).all(1) & np.isfinite(r).all(1)
    return np.where(finite, np.clip(cos, -1.0, 1.0), np.nan)


def output_comparison(name: str, target: np.ndarray, reference: np.ndarray,
                      integer: bool = False) -> OutputComparison:
    """One output against the baseline's: absolute, range-relative and cosine agreement; an output of integers
    (labels) also by the share of samples equal to the baseline's."""
    t = np.asarray(target, np.float64)
    r = np.asarray(reference, np.float64)
    if t.shape != r.shape:  # whole shapes: a sample count that differs is not a shape that does
        raise OutputMismatch(f"output {name!r} has shape {t.shape}, the baseline's {r.shape}")
    err = np.abs(t - r)
    finite = np.isfinite(err)
    max_err = float(err.max()) if err.size and finite.all() else (float("inf") if err.size else 0.0)
    mean_err = float(err[finite].mean()) if finite.any() else (float("inf") if err.size else 0.0)
    scale = float(np.abs(r[np.isfinite(r)]).max()) if np.isfinite(r).any() else 0.0
    # one value per sample has no direction of its own: its cosine is the whole column's (the N values as one
    # vector), not a per-sample sign agreement
    cos = cosine_per_sample(t, r) if t[0].size > 1 else cosine_per_sample(t.reshape(1, -1), r.reshape(1, -1))
    return OutputComparison(name=name, shape=tuple(int(d) for d in t.shape[1:]), max_abs_error=max_err,
                            mean_abs_error=mean_err, rel_error=max_err / (scale or 1.0),
                            cosine_min=float(np.nanmin(cos)) if np.isfinite(cos).all() else float("nan"),
                            cosine_mean=float(cos.mean()) if np.isfinite(cos).all() else float("nan"),
                            exact_match=float(np.mean((t.reshape(len(t), -1) == r.reshape(len(r), -1)).all(1)))
                            if integer and len(t) else None)


class NamedArrays(Protocol):
    """Arrays by output name: a dict, or a Feed."""

    def __iter__(self) -> Iterator[str]: ...

    def __contains__(self, name: object) -> bool: ...

    def __getitem__(self, name: str) -> np.ndarray: ...


def compare_outputs(outputs: NamedArrays, baseline: NamedArrays, y_true: np.ndarray | None,
                    tolerances: dict[str, tuple[float, float]], *, task: str, scored: str = "",
                    integer_outputs: tuple[str, ...] = (), costs: Costs = NOT_MEASURED,
                    baseline_costs: Costs = NOT_MEASURED, quantized: bool = False) -> Comparison:
    """Every output against the baseline's (in the baseline's order; an integer output also for equality: the
    smallest share is `label_agreement`); the task's metrics on the scored output (`scored`, else the first):
    accuracy, agreement and flips for a classifier (accuracy only with labels), MAE/RMSE and their increase
    for a regressor. Checks only the metrics `tolerances` name, so a row is judged as its task asks; a label
    output is held to the agreement's limits unless `label_agreement` has its own. A classifier whose baseline
    makes agreement say nothing (deploytool.tasks.weak_set) is judged on output error and cosine instead, at the
    limits of its group (`quantized`: deploytool.tasks.weak_set.weak_set_tolerances)."""
    names = list(baseline)
    missing = [n for n in names if n not in outputs]
    if missing:
        raise OutputMismatch(f"the target produced no output {missing[0]!r} (it produced {sorted(outputs)})")
    per_output = [output_comparison(n, outputs[n], baseline[n], n in integer_outputs) for n in names]
    key = scored if scored in names else names[0]
    first, base_first = outputs[key], baseline[key]
    n = len(base_first)
    labelled = y_true is not None and len(y_true) == n
    the_task = get_task(task)
    scores = the_task.score(np.asarray(first, np.float32), np.asarray(base_first, np.float32),
                            np.asarray(y_true) if labelled else None)
    nan = float("nan")
    task_fields = {"accuracy": nan, "baseline_accuracy": nan, "accuracy_delta_points": nan, "agreement": nan,
              **scores.fields}
    memory_bytes, baseline_memory_bytes = dict(costs.memory_bytes), dict(baseline_costs.memory_bytes)
    mem_key = memory_pair(memory_bytes, baseline_memory_bytes)
    cosines = [o.cosine_min for o in per_output]
    c = Comparison(
        flipped=list(scores.flipped),
        max_abs_error=max(o.max_abs_error for o in per_output),
        mean_abs_error=float(np.mean([o.mean_abs_error for o in per_output])),
        latency_ratio_p50=_ratio(costs.p50_ms, baseline_costs.p50_ms),
        latency_ratio_p90=_ratio(costs.p90_ms, baseline_costs.p90_ms),
        memory_ratio=_ratio(memory_bytes[mem_key], baseline_memory_bytes[mem_key]) if mem_key else None,
        memory_figures=(mem_key, mem_key) if mem_key else None,
        size_ratio=_ratio(costs.size_bytes, baseline_costs.size_bytes),
        task=task, outputs=per_output,
        cosine_min=float("nan") if any(np.isnan(cosines)) else min(cosines),
        rel_error=max(o.rel_error for o in per_output),
        scored_output=key if len(names) > 1 and the_task.scores_one_output else "",
        label_agreement=min((o.exact_match for o in per_output if o.exact_match is not None), default=None),
        task_metrics=dict(scores.metrics), **task_fields,
        agreement_uninformative=the_task.uninformative(np.asarray(base_first, np.float32)),
    )
    if c.agreement_uninformative:
        tolerances = weak_set_tolerances(tolerances, quantized)
    c.checks = _checks(c, tolerances, () if labelled else the_task.label_metrics)
    outcomes = {ch.outcome for ch in c.checks}
    c.verdict = "fail" if "fail" in outcomes else ("degraded" if "degraded" in outcomes else "pass")
    return c


def _checks(c: Comparison, tolerances: dict[str, tuple[float, float]], unlabelled: tuple[str, ...] = ()) -> list[Check]:
    """A check per tolerance whose metric this row has (no accuracy without labels: the task's `unlabelled`
    metrics, no top-5 below 10 classes, no MAE increase without regression labels); a NaN value (a non-finite
    output) fails its check."""
    values = {"accuracy_drop_points": -c.accuracy_delta_points, "agreement": c.agreement,
              "max_abs_error": c.max_abs_error, "top5_agreement": c.top5_agreement, "cosine_min": c.cosine_min,
              "rel_error": c.rel_error, "mae_increase": c.mae_increase, "rmse_increase": c.rmse_increase,
              "label_agreement": c.label_agreement, **c.task_metrics}
    if c.label_agreement is not None and "label_agreement" not in tolerances and "agreement" in tolerances:
        tolerances = {**tolerances, "label_agreement": tolerances["agreement"]}
    out = []
    for metric, lim in tolerances.items():
        v = values.get(metric)
        if v is None or metric in unlabelled:
            continue
        out.append(judge(metric, float("inf") if np.isnan(v) and TOLERANCE_METRICS[metric] == "max" else
                         (float("-inf") if np.isnan(v) else v), lim))
    return out


def parse_tolerance_overrides(items: list[str]) -> dict[str, tuple[float, float]]:
    """`--tolerance agreement=0.99,0.97` -> {"agreement": (0.99, 0.97)}; one value sets both limits."""

    out: dict[str, tuple[float, float]] = {}
    for item in items:
        name, _, value = item.partition("=")
        if name in out:
            raise UnknownOption(f"--tolerance {name} is given twice; give each metric once")
        if name not in TOLERANCE_METRICS or not value:
            raise UnknownOption(f"--tolerance {item!r}: expected METRIC=PASS[,FAIL] with METRIC one of "
                                f"{', '.join(TOLERANCE_METRICS)}")
        try:
            nums = [float(v) for v in value.split(",")]
        except ValueError:
            raise UnknownOption(f"--tolerance {item!r}: limits must be numbers") from None
        if len(nums) not in (1, 2):
            raise UnknownOption(f"--tolerance {item!r}: give one or two limits")
        problem = tolerance_problem(name, (nums[0], nums[-1]))
        if problem:
            raise UnknownOption(f"--tolerance {item!r}: {problem}")
        out[name] = (nums[0], nums[-1])
    return out
