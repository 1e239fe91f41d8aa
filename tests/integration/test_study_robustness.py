"""`deploytool study robustness` for real on LeNet-5: ART's FGSM and PGD crafted on the trained Keras model, run
through TFLite (float and int8) on the host as one stacked call per row, stored as points, reported, resumed
without measuring anything again; FGSM's bite on 500 samples of the PC model; the PyTorch twin's crafter on its
exported program; a user's .keras file with its test .npz. Kept small: 100 samples, one budget, one format."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow

SETS = ("keras/fgsm@0.2", "keras/pgd@0.2")


@pytest.fixture(scope="module")
def study(lenet5_workspace):
    from deploytool.run.request import MigrateRequest
    from deploytool.study.robustness import RobustnessRequest, robustness

    ws, *_ = lenet5_workspace
    migrate = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("tflite",), quantize=("none", "int8"),
                             targets=("host",))
    req = RobustnessRequest(migrate, attacks=("fgsm", "pgd"), eps=(0.2,), samples=100)
    first = robustness(req, ws.root, progress=False, log=lambda s: None)
    again = robustness(req, ws.root, progress=False, log=lambda s: None)
    return ws, first, again


def _records(report_json) -> list[dict]:
    report = json.loads(report_json.read_text())
    return next(s for s in report["sections"] if s["id"] == "rows")["data"]["records"]


def test_rows_exist_for_the_pc_model_and_the_target_on_every_set(study):
    _, first, _ = study
    records = _records(first.report_paths.json)
    rows = ("keras (PC)", "keras->tflite/none on host", "keras->tflite/int8 on host")
    assert {(r["set"], r["row"]) for r in records} == {(s, row) for s in SETS for row in rows}
    assert all(r["status"] == "measured" for r in records)
    assert first.rows_measured == 6 and first.sets_crafted + first.sets_reused == 2
    assert set(first.seconds_in_runtimes) == {"host"}


def test_both_attacks_bite_on_the_pc_model_and_pgd_at_least_as_hard(study):
    _, first, _ = study
    records = _records(first.report_paths.json)
    pc = {r["set"]: r for r in records if r["kind"] == "source"}
    fgsm, pgd = pc["keras/fgsm@0.2"], pc["keras/pgd@0.2"]
    assert fgsm["robust_accuracy"] < fgsm["clean_accuracy"] and 0 < fgsm["attack_success_rate"] <= 1
    assert pgd["robust_accuracy"] <= fgsm["robust_accuracy"]
    target = next(r for r in records if r["kind"] == "target" and r["set"] == "keras/pgd@0.2")
    assert 0 <= target["agreement"] <= 1 and target["only_target_fooled"] >= 0


def test_fgsm_at_0_2_costs_the_pc_model_20_points_on_500_samples(lenet5_workspace):
    """The issue's bar (an attack that does not bite is a bug), on the PC model alone: ART's FGSM at ε = 0.2."""
    from deploytool.study.attacks import AttackSpec, Crafter

    ws, spec, ds, trained = lenet5_workspace
    x01 = np.stack([ds.images(ds.x_test)[i] for i in range(500)]).astype(np.float32)
    y = ds.y_test[:500]
    crafter = Crafter(trained["keras"].get_artifact(), spec.preprocess, spec.num_classes)
    adv = crafter.craft(x01, y, AttackSpec("fgsm", 0.2))
    assert np.abs(adv - x01).max() <= 0.2 + 1e-6
    clean = crafter.classifier.predict(x01).argmax(1)
    robust = crafter.classifier.predict(adv).argmax(1)
    assert np.mean(clean == y) - np.mean(robust == y) >= 0.20


def test_the_int8_row_runs_every_set_through_one_artifact_calibrated_on_clean_data(study):
    from deploytool.store import open_store

    ws, first, _ = study
    points = open_store(None, ws.default_db_url).points(first.run_id)
    by_quant = {q: [p for p in points.values() if p.get("combo", {}).get("quantize") == q] for q in ("none", "int8")}
    assert len(by_quant["int8"]) == 3 and {p["status"] for p in by_quant["int8"]} == {"measured"}
    # one int8 model for the clean and both crafted sets: calibrated on the clean calibration set, never a crafted one
    converted = {q: {p["converted"] for p in ps} for q, ps in by_quant.items()}
    assert len(converted["int8"]) == 1 and converted["int8"] != converted["none"]
    row = next(r for r in _records(first.report_paths.json) if r["quantize"] == "int8" and r["set"] == SETS[0])
    assert row["agreement"] >= 0.9 and abs(row["robust_accuracy"] - row["pc_robust_accuracy"]) <= 0.05


def test_resume_measures_nothing_and_crafts_nothing(study):
    _, first, again = study
    assert again.run_id == first.run_id
    assert again.rows_measured == 0 and again.rows_reused == 6 and again.sets_crafted == 0


def test_deploytool_report_renders_the_stored_run(study, capsys):
    from deploytool.cli import main

    ws, first, _ = study
    first.report_paths.json.unlink()
    assert main(["report", first.run_id, "--workspace", str(ws.root)]) == 0
    assert {r["row"] for r in _records(first.report_paths.json)} >= {"keras (PC)", "keras->tflite/int8 on host"}


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


def test_a_users_keras_file_with_its_npz_is_attacked_like_a_twin(lenet5_workspace, tmp_path):
    """`--model my.keras --data test.npz`: migrate's user-model path (the file copied in, the .npz preprocessed by
    --scale/--mean/--std). Its x_train is the bundled one: the calibration, so the conversion cache, is the twin's."""
    from deploytool.cli import main
    from deploytool.data import load_raw

    ws, spec, ds, trained = lenet5_workspace
    model = tmp_path / "my.keras"
    model.write_bytes(trained["keras"].get_artifact().path.read_bytes())
    raw = load_raw(spec.dataset, spec, None)
    data = tmp_path / "test.npz"
    np.savez(data, x=raw.x_test[:48], y=raw.y_test[:48], x_train=raw.x_train, y_train=raw.y_train)
    p = spec.preprocess
    assert main(["study", "robustness", "--model", str(model), "--data", str(data), "--scale", repr(p.scale),
                 "--mean", ",".join(map(repr, p.mean)), "--std", ",".join(map(repr, p.std)), "--target", "host",
                 "--format", "tflite", "--quantize", "none", "--attack", "fgsm", "--eps", "0.3", "--samples", "48",
                 "--workspace", str(ws.root), "--quiet"]) == 0
    report = max((ws.root / "reports").glob("robustness-my-*/report.json"), key=lambda f: f.stat().st_mtime)
    records = _records(report)
    assert {r["row"] for r in records} == {"keras (PC)", "keras->tflite/none on host"}
    pc = next(r for r in records if r["kind"] == "source")
    assert pc["clean_accuracy"] - pc["robust_accuracy"] >= 0.2 and all(r["status"] == "measured" for r in records)
