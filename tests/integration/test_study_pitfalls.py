"""Issue 14 items 2 and 3 on real runtimes: the pitfalls study on LeNet-5 (Keras -> TFLite on the host, a few
samples) records an accuracy drop per mistake, and migrate's pitfall check warns on a user's test set stored
0–255 under --scale 1 and stays silent on the bundled data."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow

SAMPLES = 60


@pytest.fixture(scope="module")
def study(lenet5_workspace):
    from deploytool.study.base import StudyRun
    from deploytool.study.pitfalls import Plan, measure

    ws, *_ = lenet5_workspace
    plan = Plan.build("lenet5", "keras", None, None, SAMPLES)
    request = {**plan.identity(), "formats": "tflite", "quantize": "none", "targets": "host", "target_options": {}}
    srun = StudyRun.open("pitfalls", "lenet5", request, ws.root)
    measure(srun, plan, request)
    srun.finish()
    return srun


def test_every_applicable_mistake_has_a_drop_on_the_pc_model_and_the_artifact(study):
    from deploytool.study.pitfalls import drops

    labels, names, cells, extra = drops(study.points())
    assert labels == ["keras (PC model)", "keras->tflite/none on host"]
    measured = [n for n in names if isinstance(cells[(labels[0], n)], float)]
    assert {"no_normalisation", "range_0_255", "hw_swapped", "off_centre_crop"} <= set(measured)
    for label in labels:
        # LeNet-5 (ReLU, no batch norm) is nearly blind to a positive rescaling of its input: a missing mean/std
        # or a 0-255 range costs it about nothing (-0.05..+0.5 points over the 2,000 bundled digits)...
        assert abs(cells[(label, "no_normalisation")]) < 10 and abs(cells[(label, "range_0_255")]) < 10
        # ...while geometry costs it dearly (about 82 and 40 points over the 2,000 digits)
        assert cells[(label, "hw_swapped")] > 40 and cells[(label, "off_centre_crop")] > 15
        assert cells[(label, "nchw_as_nhwc")] == "n/a" and cells[(label, "rgb_bgr")] == "n/a"
    # an fp32 TFLite artifact makes the same mistakes as its PC model, sample for sample
    for n in measured:
        assert cells[(labels[1], n)] == pytest.approx(cells[(labels[0], n)], abs=100 / SAMPLES + 1e-9)
    assert extra["clean"][labels[0]] > 0.9
    assert extra["check_warns"]["range_0_255"] and not extra["check_warns"]["hw_swapped"]


def test_resuming_the_study_measures_nothing_again(study, lenet5_workspace):
    from deploytool.study.base import StudyRun
    from deploytool.study.pitfalls import report

    again = StudyRun.open("pitfalls", "lenet5", study.request, study.ws.root)
    assert again.run_id == study.run_id and set(again.points()) == set(study.points())
    sections = report(again)
    assert sections[0].tables[0].rows[0][0].startswith("published")


def test_migrate_warns_on_a_test_set_stored_0_255_with_scale_1(study, lenet5_workspace, tmp_path, capsys):
    from deploytool.data import mnist
    from deploytool.migrate import MigrateRequest, migrate

    ws, spec, ds, trained = lenet5_workspace
    raw = mnist.load_bundled()
    npz = tmp_path / "digits_0_255.npz"
    # x_train is the zoo run's calibration set, so the conversion is the study's (cached), not a new one
    np.savez(npz, x=raw.x_test[:40], y=raw.y_test[:40], x_train=np.ascontiguousarray(ds.calibration()),
             y_train=np.zeros(200, np.int64))
    model = trained["keras"].get_artifact().path
    out = migrate(MigrateRequest(model=str(model), formats=("tflite",), quantize=("none",), targets=("host",),
                                 test_npz=npz, warmup_runs=1, latency_samples=5), ws.root, progress=False,
                  log=lambda s: None)
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(err) == 1 and err[0].startswith("deploytool: warning: the test set holds pixels 0..255")
    assert "--scale 0.00392156862745098" in err[0]
    summary = out.report_paths.markdown.read_text()
    assert "test set: the test set holds pixels 0..255" in summary
    assert "pixels 0..255" in out.report_paths.html.read_text()


def test_the_check_is_silent_on_the_bundled_data(lenet5_workspace):
    from deploytool.migrate import MigrateRequest, prepare

    ws, *_ = lenet5_workspace
    ctx, *_ = prepare(MigrateRequest(model="lenet5", targets=("host",)), ws)
    assert ctx.dataset.warnings == ()
