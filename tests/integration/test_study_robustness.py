"""`deploytool study robustness` for real on LeNet-5: ART's FGSM crafted on the trained Keras model, run through
TFLite on the host, stored as points, reported, resumed without measuring anything again; and the PyTorch
twin's crafter on its exported program. Kept small: one attack, two budgets, one format."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study(lenet5_workspace):
    from deploytool.study.robustness import RobustnessRequest, robustness

    ws, *_ = lenet5_workspace
    req = RobustnessRequest(model="lenet5", frameworks=("keras",), formats=("tflite",), quantize=("none",),
                            targets=("host",), attacks=("fgsm",), eps=(0.2, 0.3), samples=500)
    first = robustness(req, ws.root, progress=False, log=lambda s: None)
    again = robustness(req, ws.root, progress=False, log=lambda s: None)
    return first, again


def test_rows_exist_for_the_pc_model_and_the_target_on_every_set(study):
    first, _ = study
    report = json.loads(first.report_paths.json.read_text())
    records = next(s for s in report["sections"] if s["id"] == "rows")["data"]["records"]
    assert {(r["set"], r["row"]) for r in records} == {
        (s, row) for s in ("keras/fgsm@0.2", "keras/fgsm@0.3") for row in ("keras (PC)", "keras->tflite/none on host")}
    assert all(r["status"] == "measured" for r in records)
    assert first.rows_measured == 3 and first.sets_crafted + first.sets_reused == 2


def test_fgsm_bites_on_the_pc_model(study):
    first, _ = study
    report = json.loads(first.report_paths.json.read_text())
    records = next(s for s in report["sections"] if s["id"] == "rows")["data"]["records"]
    pc = {r["eps"]: r for r in records if r["kind"] == "source"}
    # the bar: FGSM at ε = 0.2 costs the PC model at least 20 points on 500 samples
    assert pc[0.2]["clean_accuracy"] - pc[0.2]["robust_accuracy"] >= 0.20
    assert pc[0.3]["robust_accuracy"] <= pc[0.3]["clean_accuracy"]
    assert 0 < pc[0.3]["attack_success_rate"] <= 1
    target = next(r for r in records if r["kind"] == "target" and r["eps"] == 0.3)
    assert 0 <= target["agreement"] <= 1 and target["only_target_fooled"] >= 0


def test_resume_measures_nothing_and_crafts_nothing(study):
    first, again = study
    assert again.run_id == first.run_id
    assert again.rows_measured == 0 and again.rows_reused == 3 and again.sets_crafted == 0


def test_the_torch_twin_is_attacked_in_pixel_space(lenet5_workspace):
    from deploytool.study.attacks import AttackSpec, Crafter

    ws, spec, ds, trained = lenet5_workspace
    art = trained["torch"].get_artifact()
    x01 = np.stack([ds.images(ds.x_test)[i] for i in range(64)]).astype(np.float32)
    y = ds.y_test[:64]
    crafter = Crafter(art, spec.preprocess, spec.num_classes)
    adv = crafter.craft(x01, y, AttackSpec("fgsm", 0.2))
    assert adv.shape == x01.shape and np.abs(adv - x01).max() <= 0.2 + 1e-6 and 0 <= adv.min() and adv.max() <= 1
    clean = crafter.classifier.predict(x01.transpose(0, 3, 1, 2)).argmax(1)
    robust = crafter.classifier.predict(adv.transpose(0, 3, 1, 2)).argmax(1)
    assert np.mean(clean == y) - np.mean(robust == y) >= 0.20
