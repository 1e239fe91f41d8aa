"""A new converter is one module: tests/fake_converter.py (tf2onnx's ONNX with 100 added to output 0, under the
format word "onnx-fake") goes through migrate — converted in the run's conversion worker, which gets it from
$DEPLOYTOOL_PLUGINS — the stored report and localize, beside the real ONNX converter, without any file of
deploytool knowing it exists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files
OWN_WORKERS = True  # its workers learn a plugin from $DEPLOYTOOL_PLUGINS, or are counted (conftest.py)


@pytest.fixture
def fake(monkeypatch):
    from tests import fake_converter

    fake_converter.register()
    monkeypatch.setenv("DEPLOYTOOL_PLUGINS", "tests.fake_converter")  # the conversion workers import it too
    yield fake_converter
    fake_converter.unregister()


def test_a_converter_registered_by_a_test_runs_through_migrate_report_and_localize(fake, lenet5_workspace):
    from deploytool.localize import localize_run
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.run.stored import rebuild_report
    from deploytool.store import open_store

    ws, *_ = lenet5_workspace
    req = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("onnx", "onnx-fake"), quantize=("all",),
                         targets=("host",), run_id="fake-converter-run", latency_samples=5, warmup_runs=1)  # untimed: not what this tests
    out = migrate(req, ws.root, progress=False, log=lambda s: None)
    rows = {(r.combo.format, r.combo.quantize): r for r in out.results}
    assert ("onnx-fake", "none") in rows and ("onnx", "int8") in rows
    assert {q for f, q in rows if f == "onnx-fake"} == {"none", "int8"}  # `--quantize all`: the modes it has
    assert rows[("onnx", "none")].verdict == "pass"
    row = rows[("onnx-fake", "none")]
    assert row.comparison is not None and row.plan is not None and row.artifact is not None, row
    assert row.verdict == "fail" and row.comparison.agreement < 0.5, row  # class 0 wins almost everywhere
    assert row.plan.steps == ("onnx_tf", "fake_onnx") and row.plan.artifact_format == "onnx"
    assert row.artifact.converter == "tf2onnx + fake-onnx" and row.artifact.options["offset"] == fake.OFFSET

    store = open_store(None, ws.default_db_url)
    stored = {(r.combo.format, r.combo.quantize): r for r in store.results_for("fake-converter-run")}
    assert stored[("onnx-fake", "none")].plan == row.plan  # the typed plan, back from the store
    run = store.get_run("fake-converter-run")
    assert run is not None
    paths, _ = rebuild_report(run, store, ws)
    doc = json.loads(paths.json.read_text())
    fake_rows = [r for r in doc["results"] if r["format"] == "onnx-fake"]
    assert len(fake_rows) == 2 and all(r["artifact"]["converter"] == "tf2onnx + fake-onnx" for r in fake_rows)
    assert all(r["failing"] for r in fake_rows) and "onnx-fake" in paths.html.read_text()

    run = store.get_run("fake-converter-run")
    assert run is not None
    (found, loc), *_ = localize_run(run, store, ws, "onnx-fake", log=lambda s: None)
    assert found.combo.format == "onnx-fake"
    bad = loc.first_bad
    assert bad is not None and bad.index == 0 and bad.status == "wrong", loc.table()  # the first cut is off already


def test_a_plugin_converter_is_in_a_subprocess_help():
    env = {**os.environ, "DEPLOYTOOL_PLUGINS": "tests.fake_converter", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "deploytool", "migrate", "--help"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "onnx-fake (a test double" in " ".join(r.stdout.split())


def test_an_int8_route_far_off_its_peers_on_random_weights_is_an_upstream_candidate_with_its_bundle(
        fake, lenet5_workspace):
    """In a run whose weights are said to be random, every quantized row that fails is `expected`, except a route
    whose error is far beyond the other routes' in its mode, on the same weights and calibration: the fake int8
    file (100 added to output 0) against the real TFLite and onnxruntime int8 files. It becomes an upstream
    candidate with a bug bundle, its reason names its peers' errors, and it is folded into the findings; the real
    int8 rows keep their own triage."""
    from deploytool.bugs.triage import QUANTIZED_RANDOM_WEIGHTS
    from deploytool.migrate import MigrateRequest, migrate
    from deploytool.store import open_store

    ws, *_ = lenet5_workspace
    req = MigrateRequest(model="lenet5", frameworks=("keras",), formats=("tflite", "onnx", "onnx-fake"),
                         quantize=("int8",), targets=("host",), run_id="peers-run", latency_samples=5, warmup_runs=1,
                         random_weights=True)
    out = migrate(req, ws.root, progress=False, log=lambda s: None)
    rows = {r.combo.format: r for r in out.results}
    assert set(rows) == {"tflite", "onnx", "onnx-fake"}, rows
    fake_row = rows["onnx-fake"]
    assert fake_row.triage is not None and fake_row.triage.klass == "upstream", fake_row.triage
    assert "tf2onnx + fake-onnx to onnx-fake/int8: mean error" in fake_row.reason, fake_row.reason
    assert "the median of the 2 other int8 routes" in fake_row.reason and "random weights do not explain" in \
        fake_row.reason
    bundle = Path(fake_row.bundle)
    limits = json.loads((bundle / "bundle.json").read_text())["pass_limits"]
    peers = [rows[f].comparison.mean_abs_error for f in ("tflite", "onnx")]  # type: ignore[union-attr]
    assert set(limits) == {"mean_abs_error"} and limits["mean_abs_error"] == pytest.approx(4 * np.median(peers))
    # its bare reproducer (onnxruntime on the bundle's own files) shows the gap, not only a missed tolerance
    shown = subprocess.run([sys.executable, "reproduce.py"], cwd=bundle, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 1 and "REPRODUCED" in shown.stdout and "mean_abs_error" in shown.stdout, shown
    assert not any(QUANTIZED_RANDOM_WEIGHTS in n for n in fake_row.notes), fake_row.notes  # no longer "expected"
    assert any(n.startswith("not what quantizing random weights does: ") for n in fake_row.notes), fake_row.notes
    for fmt in ("tflite", "onnx"):  # the real routes: within their tolerance, or expected drift, never a finding
        r = rows[fmt]
        assert r.triage is None or r.triage.klass == "expected", (fmt, r.triage)
    stored = {r.combo.format: r for r in open_store(None, ws.default_db_url).results_for("peers-run")}
    assert stored["onnx-fake"].triage == fake_row.triage and stored["onnx-fake"].reason == fake_row.reason
