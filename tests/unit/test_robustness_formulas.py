"""The robustness study's pure parts: the formulas (accuracy, attack success rate, agreement, the samples an attack
fools on one side only), the attack grid, pixel space, the report's numbers from stored points, the figures, and
user mistakes as one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deploytool.cli import main
from deploytool.errors import UnknownOption
from deploytool.spec import Preprocess
from deploytool.study.attacks import AttackSpec, attack_grid, pixel_range, to_model_input
from deploytool.study.robust_metrics import accuracy, agreement, attack_success_rate, fools_one_not_other
from deploytool.study.robust_report import measure_rows

Y = np.array([0, 1, 2, 3, 4])


def test_attack_success_rate_counts_only_samples_right_when_clean():
    clean = np.array([0, 1, 2, 9, 9])  # right on 0, 1, 2
    adv = np.array([5, 1, 7, 3, 9])  # the attack breaks 0 and 2; sample 3 becomes right, which is not a success
    assert attack_success_rate(clean, adv, Y) == pytest.approx(2 / 3)
    assert accuracy(clean, Y) == pytest.approx(0.6) and accuracy(adv, Y) == pytest.approx(0.4)
    assert math.isnan(attack_success_rate(np.full(5, 9), adv, Y))  # nothing right when clean: undefined


def test_agreement_is_about_labels_not_truth():
    assert agreement(np.array([9, 9, 2, 3, 4]), np.array([9, 8, 2, 3, 0])) == pytest.approx(0.6)


def test_fools_one_not_other_splits_both_ways():
    pc = np.array([0, 7, 2, 7, 4])  # fooled on 1 and 3
    target = np.array([7, 7, 2, 3, 4])  # fooled on 0 and 1
    f = fools_one_not_other(pc, target, Y)
    assert f.only_target == [0] and f.only_pc == [3]  # sample 1 fools both: neither list


def test_attack_grid_crosses_eps_for_bounded_attacks_only():
    grid = attack_grid(("fgsm", "deepfool"), (0.3, 0.1, 0.1))
    assert [g.name for g in grid] == ["fgsm@0.1", "fgsm@0.3", "deepfool"]
    assert AttackSpec("pgd", 0.2).params()["eps_step"] == pytest.approx(0.05)
    with pytest.raises(UnknownOption, match="unknown attack 'cw'"):
        attack_grid(("cw",), (0.1,))
    with pytest.raises(UnknownOption, match=r"must be in \(0, 1\]"):
        attack_grid(("fgsm",), (2.0,))


def test_pixel_space_is_the_manifests_preprocessing_of_raw_pixels():
    p = Preprocess(scale=1 / 255, mean=(0.1307,), std=(0.3081,))
    assert pixel_range(p) == 255.0 and pixel_range(Preprocess(scale=1.0)) == 1.0
    x01 = np.array([0.0, 0.5, 1.0], np.float32).reshape(1, 3, 1, 1)
    expect = ((x01 * 255) / 255 - 0.1307) / 0.3081
    assert np.allclose(to_model_input(x01, p), expect, atol=1e-6)


def _points():
    y = [0, 1, 2, 3]
    return {
        "samples": {"n": 4, "y": y, "labels": list("0123"), "frameworks": ["keras"]},
        "set/clean": {"crafted_on": None, "attack": "none", "eps": 0.0},
        "set/keras/fgsm@0.2": {"crafted_on": "keras", "attack": "fgsm", "eps": 0.2},
        "row/clean/pc-keras": {"set": "clean", "kind": "source", "framework": "keras", "label": "keras (PC)",
                               "status": "measured", "preds": [0, 1, 2, 3]},
        "row/clean/k1": {"set": "clean", "kind": "target", "framework": "keras", "label": "keras->tflite/int8 on host",
                         "combo": {"quantize": "int8"}, "status": "measured", "preds": [0, 1, 2, 0]},
        "row/keras/fgsm@0.2/pc-keras": {"set": "keras/fgsm@0.2", "kind": "source", "framework": "keras",
                                        "label": "keras (PC)", "status": "measured", "preds": [9, 1, 9, 3]},
        "row/keras/fgsm@0.2/k1": {"set": "keras/fgsm@0.2", "kind": "target", "framework": "keras",
                                  "label": "keras->tflite/int8 on host", "combo": {"quantize": "int8"},
                                  "status": "measured", "preds": [9, 9, 2, 3]},
    }


def test_report_numbers_come_from_the_stored_predictions():
    pc, target = measure_rows(_points())
    assert pc["kind"] == "source" and pc["robust_accuracy"] == 0.5 and pc["attack_success_rate"] == 0.5
    assert target["clean_accuracy"] == 0.75 and target["robust_accuracy"] == 0.5
    assert target["attack_success_rate"] == pytest.approx(2 / 3)  # right on 0, 1, 2 clean; wrong on 0, 1 after
    assert target["agreement"] == 0.5 and target["only_target_fooled"] == 1 and target["only_pc_fooled"] == 1
    assert target["pc_robust_accuracy"] == 0.5 and not target["transfer"]


def test_line_chart_and_image_grid_are_svg_with_the_baseline_marked():
    from deploytool.report.png import thumbnail_uri
    from deploytool.report.lines import Series, line_chart
    from deploytool.report.svg import image_grid

    svg = line_chart([Series("pc", [0, 0.1], [99, 40], baseline=True), Series("row<1>", [0, 0.1], [98, 41])],
                     title="t", x_label="ε", y_label="%", y_range=(0, 100))
    assert svg.startswith("<svg") and svg.count("<polyline") == 2 and 'stroke-dasharray' in svg
    assert "row&lt;1&gt;" in svg
    uri, w, h = thumbnail_uri(np.zeros((28, 28), np.float32))
    grid = image_grid([(uri, w, h, "a|b")], title="g")
    assert grid.count("<image") == 1 and 'href="data:image/png;base64,' in grid


@pytest.mark.parametrize("flags, words", [
    (["--attack", "cw"], "unknown attack 'cw'"),
    (["--eps", "0"], "must be in (0, 1]"),
    (["--model", "my.keras"], "no such model file"),
    (["--model", "{tmp}/m.onnx"], "gradients, which a onnx model does not give"),
    (["--model", "{tmp}/m.tflite"], "pass the .keras or .pt2 model it was converted from"),
])
def test_user_mistakes_are_one_line(flags, words, capsys, tmp_path):
    for name in ("m.onnx", "m.tflite"):
        (tmp_path / name).write_bytes(b"not read: refused by its kind")
    flags = [f.format(tmp=tmp_path) for f in flags]
    assert main(["study", "robustness", "--workspace", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("n", [1, 40, 64, 100, 320, 500])
def test_a_padded_set_puts_the_same_samples_in_every_batch_as_when_it_ran_alone(n):
    """Stacked sets run in one call: each set is padded to whole batches with copies of its own last block, so
    every batch of 64 (the browser) or 256 (host runtimes) holds the samples it held alone, and copies of them:
    ONNX dynamic quantization's per-batch ranges, so the answers, are the per-set ones."""
    from deploytool.study.robust_sets import BATCH_SPAN, padded_index

    idx = padded_index(n)
    assert len(idx) % BATCH_SPAN == 0 and len(idx) - n < BATCH_SPAN and list(idx[:n]) == list(range(n))
    for batch in (64, 256):
        for start in range(0, len(idx), batch):
            alone = set(range(start, min(start + batch, n)))
            assert set(idx[start:start + batch]) <= alone or start >= n  # a batch of copies only is discarded


def test_a_stack_splits_its_answers_back_by_set_and_groups_rows_by_the_sets_they_need():
    from deploytool.study.robust_sets import CraftedSet, SetPlan, Stack, group_by_sets

    sets = tuple(CraftedSet(SetPlan(name, None, None), np.zeros((3, 2, 2, 1), np.float32),
                            np.full((3, 2, 2, 1), k, np.float32), {"sha256": name}) for k, name in enumerate("abc"))
    stack = Stack(sets, 3)
    m = len(stack.index)
    preds = np.repeat(np.arange(3), m)  # set k answers k everywhere
    assert {k: v.tolist() for k, v in stack.split(preds).items()} == {"a": [0] * 3, "b": [1] * 3, "c": [2] * 3}
    with pytest.raises(ValueError, match="answers for 3 sets"):
        stack.split(preds[:-1])
    groups = group_by_sets({"r1": ("a", "b"), "r2": ("a", "b"), "r3": ("b",), "r4": ()}, ("a", "c"))
    assert groups == {("a", "b"): ["r1", "r2"], ("b",): ["r3"], ("c",): []}
