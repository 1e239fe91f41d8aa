"""No needless work on the user-model path: a user's .onnx is its own
baseline on onnxruntime, so the host row on onnxruntime reuses the baseline's
outputs and latency instead of running the same file again; and whatever runs
makes one batched pass for outputs and one batch-1 pass for latency, nothing
else. The runs of the real onnxruntime are counted (each in its measuring worker), and each run counts its
inference calls."""

from __future__ import annotations

import json

import numpy as np
import pytest

from deploytool.runtimes.measure import readings_for
from tests.integration.test_usermodel import onnx_model

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files

N, WARMUP = 300, 3


@pytest.fixture
def user_onnx(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "t.npz", x=rng.integers(0, 255, (N, 8, 8, 1)).astype(np.uint8), y=rng.integers(0, 10, N))
    return onnx_model(tmp_path / "m.onnx", [None, 8, 8, 1]), tmp_path / "t.npz"


@pytest.fixture
def counted(monkeypatch):
    """Every load + run a host runtime is asked for (each in its measuring worker), by runtime."""
    from deploytool.runtimes import isolated

    passes: list[str] = []
    real = isolated.measure_in_own_process

    def counting(cls, *a, **k):
        passes.append(cls.name)
        return real(cls, *a, **k)

    monkeypatch.setattr(isolated, "measure_in_own_process", counting)
    return passes


def calls_of(env: dict) -> tuple[list[int], int]:
    """(sizes of the batched pass's calls, batch-1 calls) of one measured pass, as the runtime counted them."""
    c = env["inference_calls"]
    return c["batched"], c["batch1"]


def test_a_users_onnx_row_on_its_baseline_runtime_reuses_the_baseline(user_onnx, counted, tmp_path):
    from deploytool.migrate import MigrateRequest, migrate

    model, data = user_onnx
    req = MigrateRequest(model=str(model), test_npz=data, scale=1 / 255, targets=("host",), formats=("onnx",),
                         quantize=("none",), warmup_runs=WARMUP)
    out = migrate(req, tmp_path / "ws", progress=False, log=lambda s: None)
    (row,) = out.results
    assert row.status == "measured" and any("measured once" in n for n in row.notes), row.notes
    baseline = json.loads(next((tmp_path / "ws" / "models").glob("*/baseline.json")).read_text())
    assert np.array_equal(np.load(row.outputs_path), np.load(baseline["outputs_path"]))
    assert np.array_equal(np.load(row.latency_path), np.load(baseline["latency_samples_path"]))
    # one load + run of the file (the baseline's); in it, one batched pass (batch 256) for outputs and one
    # batch-1 pass (first call + warm-up + every sample, K per timer reading when an inference is that short)
    assert counted == ["onnxruntime"], counted
    batched, single = calls_of(row.environment)
    assert sum(batched) == N and len(batched) == -(-N // 256)
    k = row.environment["latency_inferences_per_reading"]
    assert single == 1 + WARMUP + k * readings_for(N, k) and k * readings_for(N, k) >= N


def test_a_quantized_row_is_run_once_on_its_own(user_onnx, counted, tmp_path):
    from deploytool.migrate import MigrateRequest, migrate

    model, data = user_onnx
    req = MigrateRequest(model=str(model), test_npz=data, scale=1 / 255, targets=("host",), formats=("onnx",),
                         quantize=("none", "dynamic"), warmup_runs=WARMUP, latency_samples=50)
    out = migrate(req, tmp_path / "ws", progress=False, log=lambda s: None)
    assert [r.status for r in out.results] == ["measured", "measured"]
    dynamic = next(r for r in out.results if r.combo.quantize == "dynamic")
    assert not any("measured once" in n for n in dynamic.notes)
    # baseline + the dynamic row; the passthrough row ran nothing
    assert counted == ["onnxruntime", "onnxruntime"], counted
    batched, single = calls_of(dynamic.environment)
    k = dynamic.environment["latency_inferences_per_reading"]
    assert sum(batched) == N and single == 1 + WARMUP + k * readings_for(50, k)


def test_each_test_sets_baseline_is_measured_once_when_a_user_switches_between_them(user_onnx, counted, tmp_path):
    """One model, two test sets, back and forth (`--fresh` each time): each set's baseline is measured on its
    first run only, and each run's row is that set's own baseline."""
    from deploytool.migrate import MigrateRequest, migrate

    model, data = user_onnx
    rng = np.random.default_rng(1)
    other = tmp_path / "other.npz"
    np.savez(other, x=rng.integers(0, 255, (N // 2, 8, 8, 1)).astype(np.uint8), y=rng.integers(0, 10, N // 2))
    rows = []
    for npz in (data, other, data, other):
        req = MigrateRequest(model=str(model), test_npz=npz, scale=1 / 255, targets=("host",), formats=("onnx",),
                             quantize=("none",), warmup_runs=WARMUP, latency_samples=20, fresh=True)
        (row,) = migrate(req, tmp_path / "ws", progress=False, log=lambda s: None).results
        rows.append(row)
    assert counted == ["onnxruntime", "onnxruntime"], counted  # the first run on each set, and no other
    assert [len(np.load(r.outputs_path)) for r in rows] == [N, N // 2, N, N // 2]
    assert np.array_equal(np.load(rows[0].outputs_path), np.load(rows[2].outputs_path))
    assert len(list((tmp_path / "ws" / "models").glob("*/baselines/*/baseline.json"))) == 2


def test_a_rerun_of_a_finished_run_measures_nothing_and_leaves_its_record_as_it_was(user_onnx, counted, tmp_path):
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.store import open_store

    model, data = user_onnx
    req = MigrateRequest(model=str(model), test_npz=data, scale=1 / 255, targets=("host",), formats=("onnx",),
                         quantize=("none",), warmup_runs=WARMUP, latency_samples=20)
    first = migrate(req, tmp_path / "ws", progress=False, log=lambda s: None)
    store = open_store(None, f"sqlite:///{tmp_path / 'ws' / 'results.db'}")
    recorded = store.get_run(first.run_id)
    read_only = f"sqlite:///file:{tmp_path / 'ws' / 'results.db'}?mode=ro&uri=true"  # any write would raise
    again = migrate(req, tmp_path / "ws", read_only, progress=False, log=lambda s: None)
    assert again.run_id == first.run_id and again.reused == 1 and counted == ["onnxruntime"]
    assert recorded is not None and store.get_run(first.run_id) == recorded and recorded.status == "complete"
    assert [r.to_json() for r in again.results] == [r.to_json() for r in first.results]


def test_a_user_models_migrate_that_measures_nothing_new_loads_no_browser_phone_zoo_or_worker(user_onnx, tmp_path):
    """bench/bench_user_onnx.py's run (issue 37, start-up): a user's ONNX with its .npz on the host, its row the
    baseline's own, run again with --fresh. The command line reads the web and Android flags from their
    declarations (targets/flags.py), a user's model needs no zoo, and a run that measures nothing new starts no
    worker: none of their modules is imported."""
    import subprocess
    import sys

    model, npz = user_onnx
    argv = ["migrate", "--model", str(model), "--data", str(npz), "--scale", str(1 / 255), "--target", "host",
            "--format", "onnx", "--quantize", "none", "--workspace", str(tmp_path / "ws"), "--quiet",
            "--latency-samples", "5", "--warmup", "1"]
    code = ("import sys, contextlib, io; from deploytool.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): rc = main(sys.argv[1:])\n"
            "print(rc, *sorted(m for m in sys.modules if m.startswith(('deploytool.', 'multiprocessing'))))")
    first = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300)
    assert first.stdout.split()[:1] == ["0"], first.stderr[-2000:]  # the baseline measured and stored
    again = subprocess.run([sys.executable, "-c", code, *argv, "--fresh"], capture_output=True, text=True, timeout=300)
    rc, *loaded = again.stdout.split()
    assert rc == "0", again.stderr[-2000:]
    for machinery in ("deploytool.targets.web", "deploytool.targets.android", "deploytool.devices.adb",
                      "deploytool.zoo", "deploytool.lab", "deploytool.proc.worker", "multiprocessing"):
        assert machinery not in loaded, (machinery, loaded)
    assert {"deploytool.targets.host", "deploytool.report.html", "deploytool.run.runner"} <= set(loaded)
