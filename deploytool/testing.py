"""A model's CI guard in one pytest line: `assert_migrates(model, data, ...)` migrates it with deploytool.api and
fails the test with an AssertionError that names every row that broke a limit, what it broke, and the report to
open. A row holds when it was measured, its verdict is not fail (nor degraded with `allow_degraded=False`) and
it is within each limit given; rows a target skips (unsupported, not applicable) are left out, and a run with
no row measured fails.

    from deploytool.testing import assert_migrates

    def test_my_model_survives_int8_on_the_phone_and_in_the_browser():
        assert_migrates("my.keras", "test.npz", target=("host", "web"), quantize="int8", min_agreement=0.98)
"""

from __future__ import annotations

from typing import Any

from deploytool.api import Run, Words, migrate
from deploytool.report.table import Row

__all__ = ["assert_migrates", "broken_limits"]


def broken_limits(row: Row, min_agreement: float | None = None, max_rmse_increase: float | None = None,
                  max_latency_ratio: float | None = None, allow_degraded: bool = True) -> list[str]:
    """What `row` breaks of the limits, each in a few words ([] when it holds)."""
    if row.verdict is None:
        return [f"{row.status}: {row.reason[:200]}"] if row.failing else []
    out = []
    if row.verdict == "fail" or (row.verdict == "degraded" and not allow_degraded):
        out.append(f"verdict {row.verdict}" + (f" ({'; '.join(c.metric for c in row.checks if c.outcome != 'pass')})"
                                               if row.checks else ""))
    limits = (("agreement", row.agreement, min_agreement, "<"), ("rmse_increase", row.rmse_increase,
              max_rmse_increase, ">"), ("latency ratio", row.latency_ratio, max_latency_ratio, ">"))
    for what, value, limit, worse in limits:
        if limit is None:
            continue
        if value is None:
            out.append(f"{what} not measured (limit {limit:g})")
        elif (value < limit) if worse == "<" else (value > limit):
            out.append(f"{what} {value:.4g} {worse} {limit:g}")
    return out


def assert_migrates(model: Any, data: Any = None, *, target: Words = ("host",), quantize: Words = ("none",),
                    formats: Words = "all", min_agreement: float | None = None,
                    max_rmse_increase: float | None = None, max_latency_ratio: float | None = None,
                    allow_degraded: bool = True, **options: Any) -> Run:
    """Migrate `model` (a path, a zoo name, a keras.Model or a torch.nn.Module) on the test set `data` and fail
    with an AssertionError naming each row that breaks a limit and the report's path; returns the Run when every
    row holds. `min_agreement` (top-1 agreement with the PC model, 0..1), `max_rmse_increase` (relative RMSE
    change, 0.05 = 5% worse), `max_latency_ratio` (p50 over the PC baseline's) are checked besides each row's
    verdict against its tolerances. `options` go to deploytool.api.migrate (workspace, latency_samples,
    runtimes, backends, tolerances, ...)."""
    run = migrate(model, data, targets=target, formats=formats, quantize=quantize, **options)
    broken = {r.label: b for r in run.rows
              if (b := broken_limits(r, min_agreement, max_rmse_increase, max_latency_ratio, allow_degraded))}
    measured = [r for r in run.rows if r.verdict is not None]
    if broken or not measured:
        lines = [f"  {label}: {', '.join(b)}" for label, b in broken.items()]
        head = (f"{len(broken)} of {len(run.rows)} rows of run {run.run_id} do not hold" if broken
                else f"run {run.run_id} measured no row ({len(run.rows)} rows, none measured)")
        raise AssertionError("\n".join([head + ":" if lines else head, *lines,
                                        f"report: {run.report_path or 'not written'}"]))
    return run
