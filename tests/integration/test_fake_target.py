"""A new target is one module plus a `register` call: tests/fake_target.py (a
board whose runtime wraps the real onnxruntime and adds 100 to output 0) goes
through migrate, the stored report, localize and a bug bundle — and the
bundle's command, run as written with the plugin named, fails the same way —
without any file of deploytool knowing it exists."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fake_target
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files
OWN_WORKERS = True  # its workers learn a plugin from $DEPLOYTOOL_PLUGINS, or are counted (conftest.py)


@pytest.fixture
def fake():
    fake_target.register()
    yield
    fake_target.unregister()


def test_a_target_registered_by_a_test_runs_through_migrate_report_localize_and_a_bundle(fake, lenet5_workspace):
    from deploytool.localize import localize_run
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.run.stored import rebuild_report
    from deploytool.store import open_store

    ws, *_ = lenet5_workspace
    req = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("onnx",), quantize=("none",),
                         targets=("host", "fake"), target_options={"fake": {"boards": ["board-a", "board-b"]}},
                         run_id="fake-run", latency_samples=5, warmup_runs=1)  # untimed: not what this tests
    out = migrate(req, ws.root, progress=False, log=lambda s: None)
    by_where = {r.combo.where: r for r in out.results}
    assert sorted(by_where) == ["fake@board-a", "fake@board-b", "host"]
    assert by_where["host"].verdict == "pass"
    for board in ("board-a", "board-b"):
        row = by_where[f"fake@{board}"]
        assert row.verdict == "fail" and row.environment["runtime"] == "fake-ort"
        assert row.comparison is not None and row.comparison.agreement < 0.5  # class 0 wins almost everywhere
    with pytest.raises(Exception, match="has no option colour"):
        MigrateRequest(target_options={"fake": {"colour": "red"}}, targets=("fake",)).options_for("fake")

    store = open_store(None, ws.default_db_url)
    run = store.get_run("fake-run")
    assert run is not None
    paths, results = rebuild_report(run, store, ws)
    html = paths.html.read_text()
    assert "keras-&gt;onnx/none on fake@board-a" in html or "keras->onnx/none on fake@board-a" in html
    doc = json.loads(paths.json.read_text())
    assert sorted(r["target"] for r in doc["results"]) == ["fake", "fake", "host"]

    run = store.get_run("fake-run")
    assert run is not None
    (found, loc), *_ = localize_run(run, store, ws, "fake@board-a", log=lambda s: None)
    assert "a fault of the fake runtime" in loc.verdict, loc.verdict
    bundle = Path(found.bundle)
    readme = (bundle / "README.md").read_text()
    assert "## Where it goes wrong" in readme and (bundle / "minimal").is_dir()
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["judges_itself"] is False and meta["where"] == "fake@board-a"

    # the bundle's command, as written, with the plugin named: the same combination fails the same way
    command = readme.split("With deploytool, the same combination again:")[1].split("```")[1].strip()
    argv = shlex.split(command)
    assert argv[:2] == ["deploytool", "migrate"] and "--fake-offset" in argv and "--device" not in argv
    env = {**os.environ, "DEPLOYTOOL_PLUGINS": "tests.fake_target", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "deploytool", *argv[1:], "--quiet"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "fake@board-a" in r.stdout and "1 failing" in r.stdout, r.stdout


def test_a_plugin_that_does_not_import_is_one_line(tmp_path):
    env = {**os.environ, "DEPLOYTOOL_PLUGINS": "no_such_module_here"}
    r = subprocess.run([sys.executable, "-m", "deploytool", "migrate", "--help"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "no_such_module_here" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
