"""`runner.pair_again`: at the end of a run, a row whose paired timing never saw the machine quiet (fewer than
MIN_CLEAN_BLOCKS blocks clean against its baseline's reference floor over the run) is timed again, and the new
timing replaces its ratio only when more of its blocks are quiet. The timing itself is a scripted double here
(tests/integration times real runtimes); what is pinned is which rows are timed again and what they keep."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from deploytool.artifact import Artifact
from deploytool.latency import PairedLatency
from deploytool.result import Combo, Measurement, Result, Status
from deploytool.run import runner
from deploytool.run.judge import paired_ratios
from tests.scores import compare
from deploytool.run.context import RunContext
from deploytool.runtimes.measure import PAIR_BLOCKS

QUIET = ([0.020] * PAIR_BLOCKS, [0.40] * PAIR_BLOCKS)  # ratio 0.05
BUSY = ([0.028] * PAIR_BLOCKS, [0.64] * PAIR_BLOCKS)  # a co-tenant's spell: ratio 0.04375


class _Artifact:
    sha256 = "a"


def _row(key: str, blocks: tuple[list[float], list[float]], framework: str = "keras") -> Result:
    y = np.array([0, 1])
    p = PairedLatency.of(*blocks, "the PC baseline")
    c = paired_ratios(compare(np.eye(2), np.eye(2), y, {}), p)
    return Result(run_id="r", combo_key=key, model="m", dataset="d", combo=Combo(framework, "tflite", key, "host"),
                  status=Status.MEASURED, measurement=Measurement(0.02, 0.03, 0.04, 0.02, 100, paired=p),
                  comparison=c, artifact=cast(Artifact, _Artifact()), baseline_framework=framework)


class _Ctx:
    def source(self, framework: str) -> str:
        return framework


def _ctx() -> RunContext:
    return cast(RunContext, _Ctx())  # the stand-in has what pair_again reads (pair_with_baseline is the double)


@pytest.fixture
def timings(monkeypatch):
    """A scripted double of `pair_with_baseline`: each call takes the next timing of its row's list."""
    script: dict[str, list[tuple[list[float], list[float]]]] = {}
    calls: list[str] = []

    def double(ctx, combo, artifact, src):
        calls.append(combo.quantize)
        return PairedLatency.of(*script[combo.quantize].pop(0), "the PC baseline", others_busy_fraction=0.5), ""

    monkeypatch.setattr(runner, "pair_with_baseline", double)
    return script, calls


def test_a_row_timed_only_in_a_busy_spell_is_timed_again_and_keeps_the_quiet_timing(timings):
    script, calls = timings
    quiet, busy = _row("quiet", QUIET), _row("busy", BUSY)
    assert busy.comparison is not None
    assert busy.comparison.latency_ratio_p50 == pytest.approx(0.04375)
    script["busy"] = [QUIET]
    changed = runner.pair_again(_ctx(), [quiet, busy])
    assert calls == ["busy"] and changed == [busy]  # the quiet row set the floor (0.40 ms) and is not timed again
    assert busy.measurement is not None and busy.measurement.paired is not None
    assert busy.comparison.latency_ratio_p50 == pytest.approx(0.05) == busy.measurement.paired.ratio
    assert busy.environment["cpu_busy_fraction_during_timing"] == 0.5


def test_a_second_busy_timing_is_not_kept_and_the_rounds_are_bounded(timings):
    script, calls = timings
    quiet, busy = _row("quiet", QUIET), _row("busy", BUSY)
    script["busy"] = [BUSY] * runner.PAIR_AGAIN_ROUNDS
    assert runner.pair_again(_ctx(), [quiet, busy]) == []
    assert busy.comparison is not None
    assert calls == ["busy"] * runner.PAIR_AGAIN_ROUNDS and busy.comparison.latency_ratio_p50 == pytest.approx(0.04375)


def test_floors_are_per_baseline_and_quick_or_unmeasured_rows_are_left_alone(timings):
    script, calls = timings
    # the torch baseline's only row is its own floor: quiet by its own measure, whatever the keras rows did
    torch = _row("torch-busy", BUSY, framework="torch")
    quick = _row("quick", ([0.028] * 5, [0.64] * 5))  # a quick run's five blocks: not extended, not timed again
    failed = _row("failed", BUSY)
    failed.status = Status.RUNTIME_FAILED
    assert runner.pair_again(_ctx(), [_row("quiet", QUIET), torch, quick, failed]) == [] and calls == []
