"""The pure judge: a runtime's Outputs and the PC baseline -> Comparison and
Measurement. Hand-computed cases pin what each number means."""

from __future__ import annotations

import numpy as np
import pytest

from deploytool.run.baseline import Baseline
from deploytool.run.compare import Costs
from deploytool.run.judge import Reference, judge, measurement_of
from deploytool.result import Combo, Result, Status, Verdict
from deploytool.runtimes.base import Outputs

Y = np.array([0, 1, 2, 0])
BASE = np.array([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.2, 0.8], [0.2, 0.7, 0.1]], np.float32)  # 3 of 4 right


def _baseline(tmp_path, latency=(1.0, 2.0), memory=None, size=1000) -> Baseline:
    np.save(tmp_path / "b.npy", BASE)
    return Baseline(model="m", framework="keras", artifact_sha256="", dataset_sha256="", accuracy=0.75, num_samples=4,
                    outputs_path=str(tmp_path / "b.npy"), latency_samples_path="",
                    latency={"p50_ms": latency[0], "p90_ms": latency[1]}, throughput_sps=None,
                    memory_bytes=memory or {"process_peak_rss_delta_bytes": 100.0}, load_ms=None,
                    first_inference_ms=None, size_bytes=size)


def _outputs(out, latency=(2.0, 2.0, 2.0, 4.0), memory=None) -> Outputs:
    return Outputs(outputs=np.asarray(out, np.float32), latency_ms=np.asarray(latency, np.float64),
                   memory_bytes=memory or {"process_peak_rss_delta_bytes": 50.0}, load_ms=3.0)


def test_identical_outputs_pass_with_exact_numbers(tmp_path):
    c, m = judge(_outputs(BASE), _baseline(tmp_path).reference(), Y, {"agreement": (0.99, 0.9)}, size_bytes=250)
    assert (c.accuracy, c.baseline_accuracy, c.agreement, c.max_abs_error, c.flipped) == (0.75, 0.75, 1.0, 0.0, [])
    assert c.verdict == "pass" and c.size_ratio == 0.25 and c.memory_ratio == 0.5
    assert m.p50_ms == 2.0 and m.latency_samples == 4 and c.latency_ratio_p50 == 2.0 and m.load_ms == 3.0


def test_one_flip_is_counted_named_and_judged(tmp_path):
    out = BASE.copy()
    out[3] = [0.6, 0.3, 0.1]  # sample 3 now says class 0: right, where the baseline was wrong
    c, _ = judge(_outputs(out), _baseline(tmp_path).reference(), Y,
                 {"agreement": (0.9, 0.7), "accuracy_drop_points": (0.0, 1.0), "max_abs_error": (0.1, 0.5)},
                 size_bytes=1000)
    assert c.agreement == 0.75 and c.accuracy == 1.0 and c.accuracy_delta_points == pytest.approx(25.0)
    (f,) = c.flipped
    assert (f.index, f.true_label, f.baseline_pred, f.target_pred) == (3, 0, 1, 0)
    assert c.max_abs_error == pytest.approx(0.4) and c.mean_abs_error == pytest.approx(0.8 / 12)
    outcomes = {ch.metric: ch.outcome for ch in c.checks}
    assert outcomes == {"agreement": "degraded", "accuracy_drop_points": "pass", "max_abs_error": "degraded"}
    assert c.verdict == "degraded"


def test_a_broken_limit_fails_and_the_row_is_failing(tmp_path):
    out = np.roll(BASE, 1, axis=1)  # every prediction moves
    c, m = judge(_outputs(out), _baseline(tmp_path).reference(), Y, {"agreement": (0.99, 0.9)}, size_bytes=1000)
    assert c.agreement == 0.0 and c.verdict == "fail"
    r = Result("r", "k", "m", "d", Combo("keras", "tflite", "int8", "host"), Status.MEASURED, comparison=c,
               measurement=m)
    assert r.verdict is Verdict.FAIL and r.failing and r.metrics["flipped_count"] == 4


def test_unlike_memory_figures_give_no_ratio(tmp_path):
    c, m = judge(_outputs(BASE, memory={"renderer_peak_rss_bytes": 5.0}), _baseline(tmp_path).reference(), Y, {}, size_bytes=1)
    assert c.memory_ratio is None and m.memory == ("renderer_peak_rss_bytes", 5.0)


def test_the_same_inputs_give_the_same_judgement(tmp_path):
    args = (_outputs(BASE * 0.5), _baseline(tmp_path).reference(), Y, {"agreement": (0.99, 0.9)})
    assert judge(*args, size_bytes=10) == judge(*args, size_bytes=10)
    assert measurement_of(args[0]) == measurement_of(args[0])


@pytest.mark.parametrize("status,final,failing", [
    ("measured", True, False), ("conversion_failed", True, True), ("unsupported", True, False),
    ("not_applicable", True, False), ("delegate_refused", True, False), ("wrong_abi", True, True),
    ("load_failed", True, True), ("runtime_failed", False, True), ("timeout", False, True),
    ("device_lost", False, True), ("error", False, True), ("worker_lost", False, True), ("no_worker", False, True)])
def test_each_status_says_whether_it_is_final_and_failing(status, final, failing):
    s = Status(status)
    assert (s.final, s.failing) == (final, failing)
    r = Result("r", "k", "m", "d", Combo("keras", "tflite", "none", "host"), status)
    assert r.failing == failing and r.outcome == status and r.verdict is None


def test_a_load_failure_is_found_at_the_load_stage():
    from deploytool.bugs.findings import stage_of

    r = Result(run_id="r", combo_key="k", model="m", dataset="d", combo=Combo("tflite", "tflite", "none", "web"),
               status=Status.LOAD_FAILED, reason="browser: Failed to create TFLiteWebModelRunner")
    assert stage_of(r) == "load"


def test_the_judge_takes_values_and_a_baseline_read_from_disk_gives_the_same_ones(tmp_path):
    """The judge reads nothing: a Reference built in memory judges as the stored baseline's reference does."""
    in_memory = Reference(BASE, None, Costs(1.0, 2.0, {"process_peak_rss_delta_bytes": 100.0}, 1000))
    stored = _baseline(tmp_path).reference()
    assert np.array_equal(stored.outputs, in_memory.outputs) and stored.costs == in_memory.costs
    args = (_outputs(BASE * 0.5), Y, {"agreement": (0.99, 0.9)})
    assert judge(args[0], in_memory, *args[1:], size_bytes=10) == judge(args[0], stored, *args[1:], size_bytes=10)


def test_an_image_classifiers_scores_are_judged_through_the_one_entry_point_as_its_one_output(tmp_path):
    """No layout on either side (an image classifier's stored class scores): the judge compares them as one output
    through compare_outputs, as any model's; scores of another class count are an OutputMismatch naming the
    shapes, never a silent reshape."""
    from deploytool.errors import OutputMismatch
    from deploytool.run.judge import SCORES

    c, _ = judge(_outputs(BASE), _baseline(tmp_path).reference(), Y, {"agreement": (0.99, 0.9)}, size_bytes=1000)
    assert [o.name for o in c.outputs] == [SCORES] and c.outputs[0].shape == (3,) and c.scored_output == ""
    with pytest.raises(OutputMismatch, match=r"has shape \(4, 2\), the baseline's \(4, 3\)"):
        judge(_outputs(BASE[:, :2]), _baseline(tmp_path).reference(), Y, {}, size_bytes=1000)
