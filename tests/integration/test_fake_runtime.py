"""A new runtime is one module: tests/fake_runtime.py (the real onnxruntime, then 100 added to the first output
value) runs through migrate beside onnxruntime on the same file — in the row's own measuring worker, which
imports it by its module path —, through localize (the row's runtime runs every cut), and through a lab night
whose matrix names it, without any file of deploytool knowing it exists."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files


@pytest.fixture
def fake(monkeypatch):
    from tests import fake_runtime

    fake_runtime.register()
    monkeypatch.setenv("DEPLOYTOOL_PLUGINS", "tests.fake_runtime")
    yield fake_runtime
    fake_runtime.unregister()


def test_a_runtime_registered_by_a_test_runs_through_migrate_and_localize(fake, lenet5_workspace):
    from deploytool.localize import localize_run
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.store import open_store

    ws, *_ = lenet5_workspace
    req = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("onnx",), quantize=("none",),
                         targets=("host",), runtimes=("onnxruntime", fake.NAME), run_id="fake-runtime-run",
                         latency_samples=20, warmup_runs=1)
    out = migrate(req, ws.root, progress=False, log=lambda s: None)
    rows = {r.combo.runtime or "onnxruntime": r for r in out.results}  # the default runtime is stored unnamed
    assert set(rows) == {"onnxruntime", fake.NAME}
    assert rows["onnxruntime"].verdict == "pass"
    row = rows[fake.NAME]
    assert row.verdict == "fail" and row.comparison.agreement < 0.5, row  # class 0 wins almost everywhere
    assert row.artifact.sha256 == rows["onnxruntime"].artifact.sha256  # one file, two runtimes
    assert row.environment["runtime"] == fake.NAME

    store = open_store(None, ws.default_db_url)
    (found, loc), *_ = localize_run(store.get_run("fake-runtime-run"), store, ws, fake.NAME, log=lambda s: None)
    assert found.combo.runtime == fake.NAME
    bad = loc.first_bad
    assert bad is not None and bad.index == 0, loc.table()  # its first cut is off already: the runtime, not the file


def test_a_lab_night_runs_a_registered_runtime_in_its_matrix(fake, lenet5_workspace, tmp_path):
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    (tmp_path / "lab.toml").write_text(f"""
[lab]
name = "fake-rt"
latency_samples = 20
test_samples = 200

[[models]]
name = "lenet5"
frameworks = ["keras"]

[matrix]
formats = ["onnx"]
quantize = ["none"]
targets = ["host"]
runtimes = ["{fake.NAME}"]
""")
    night = run_night(load_lab(tmp_path / "lab.toml"), ws, SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}"), "n1",
                      progress=False, log=lambda s: None)
    (cell,) = night.judged
    assert cell.result.combo.runtime == fake.NAME and cell.result.environment["lab_worker"]
    assert cell.result.verdict == "fail" and cell.result.comparison.agreement < 0.5
