"""A new runtime is one module: tests/fake_runtime.py (the real onnxruntime, then 100 added to the first output
value) runs through migrate beside onnxruntime on the same file — in the row's own measuring worker, which
imports it by its module path —, through localize (the row's runtime runs every cut), and through a lab night
whose matrix names it, without any file of deploytool knowing it exists."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files
OWN_WORKERS = True  # its workers learn a plugin from $DEPLOYTOOL_PLUGINS, or are counted (conftest.py)


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
    row, real = rows[fake.NAME], rows["onnxruntime"]
    assert row.comparison is not None and row.artifact is not None and real.artifact is not None, row
    assert row.verdict == "fail" and row.comparison.agreement < 0.5, row  # class 0 wins almost everywhere
    assert row.artifact.sha256 == real.artifact.sha256  # one file, two runtimes
    assert row.environment["runtime"] == fake.NAME
    # onnxruntime alone gets the file right: the row's finding is not confirmed by its bare reproducer, so nothing
    # is addressed to onnxruntime for what a runtime of this test did
    store = open_store(None, ws.default_db_url)
    (finding,) = [f for f in store.findings() if any(fake.NAME in e for e in f.examples)]
    assert finding.klass == "upstream" and finding.state == "not reproduced", finding.confirmation
    assert not (ws.finding_dir(finding.id) / "issue.md").exists()

    run = store.get_run("fake-runtime-run")
    assert run is not None
    (found, loc), *_ = localize_run(run, store, ws, fake.NAME, log=lambda s: None)
    assert found.combo.runtime == fake.NAME
    bad = loc.first_bad
    assert bad is not None and bad.index == 0, loc.table()  # its first cut is off already: the runtime, not the file


def test_a_crash_in_deploytools_own_code_is_its_bug_logged_with_its_traceback_never_a_finding(fake, lenet5_workspace):
    from deploytool.bugs.findings import internal_log
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.store import open_store

    ws, *_ = lenet5_workspace
    req = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("onnx",), quantize=("none",),
                         targets=("host",), runtimes=(fake.CRASHING,), run_id="planted-bug", latency_samples=5,
                         warmup_runs=1)
    out = migrate(req, ws.root, progress=False, log=lambda s: None)
    (row,) = out.results
    assert row.status == "error" and row.triage is not None and row.triage.klass == "internal_error", row.reason
    assert row.triage.raised_at is not None
    assert row.triage.raised_at.file.endswith("tests/fake_runtime.py")  # raised in the worker, seen across it
    log = internal_log(ws, "planted-bug")
    assert row.reason.startswith("deploytool bug") and str(log) in row.reason
    text = log.read_text()
    assert "AttributeError" in text and "fake_runtime.py" in text and "Traceback" in text
    assert not row.bundle  # nothing in it would be for upstream
    store = open_store(None, ws.default_db_url)
    assert not [f for f in store.findings() if any(fake.CRASHING in e for e in f.examples)]
    assert not any(fake.CRASHING in p.read_text() for p in ws.root.glob("findings/*/issue.md"))


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
    assert cell.result.combo.runtime == fake.NAME and cell.result.lab.worker
    assert cell.result.comparison is not None
    assert cell.result.verdict == "fail" and cell.result.comparison.agreement < 0.5
