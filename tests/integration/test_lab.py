"""The device lab on Dask's embedded LocalCluster: nights are stored, resumed and
judged against the last good night. Injected regressions (a runtime double 30%
slower; a few flipped samples beyond the tolerance) are flagged, identical nights
raise no alert, a slowdown timed on a busy machine is measured twice and reported
"unclear", not alerted, a cell whose resource no worker has is `no_worker` within the
bounded wait instead of hanging, and lab.html shows the nights x cells matrix,
trends and links."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tests import fake_target, lab_double
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files
OWN_WORKERS = True  # its workers learn a plugin from $DEPLOYTOOL_PLUGINS, or are counted (conftest.py)

LAB = """
[lab]
name = "t"
latency_samples = 200
test_samples = 500

[[models]]
name = "lenet5"
frameworks = ["keras"]

[matrix]
formats = ["tflite"]
quantize = ["none"]
targets = ["host"]
runtimes = ["lab-double"]
"""


@pytest.fixture
def double():
    lab_double.register()
    lab_double.KNOBS.update(slower=1.0, flips=0, seed=0, only_threads=0, busy=0.0, band_runs=-1)
    yield lab_double.KNOBS
    lab_double.KNOBS.update(only_threads=0, busy=0.0, band_runs=-1)
    lab_double.unregister()


def _night(lab, ws, store, name, **kw):
    from deploytool.lab.night import run_night

    return run_night(lab, ws, store, name, progress=False, log=lambda s: None, **kw)


def test_nights_flag_injected_regressions_and_identical_nights_raise_none(double, lenet5_workspace, tmp_path):
    from deploytool.lab.labfile import load_lab
    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    (tmp_path / "lab.toml").write_text(LAB)
    lab = load_lab(tmp_path / "lab.toml")
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}")
    first = _night(lab, ws, store, "n1")
    (cell,) = first.judged
    assert cell.result.verdict == "pass" and cell.result.lab.worker and not first.alerts
    assert _night(lab, ws, store, "n2").alerts == []  # identical night: no alert
    again = _night(lab, ws, store, "n2")  # the same name resumes: nothing is measured twice
    assert again.reused == 1 and again.alerts == []

    # two processes in a row land in a slower band (+30%), the third does not: measured again until a process
    # reads the usual speed, tonight's row is the fastest process, and nothing alerts
    double.update(slower=1.3, band_runs=2)
    banded = _night(lab, ws, store, "n2a")
    (j,) = banded.judged
    latency = next(c for c in j.changes if c.metric == "latency")
    assert not banded.alerts and j.measured_again and latency.outcome == "same", j.changes
    assert double["band_runs"] == 0 and j.result.measurement.p50_ms == pytest.approx(0.2, rel=0.05)
    double["band_runs"] = -1

    double.update(slower=1.3, busy=0.95)  # slower on a busy machine: measured twice, not judged, said so
    busy = _night(lab, ws, store, "n2b")
    (j,) = busy.judged
    latency = next(c for c in j.changes if c.metric == "latency")
    assert not busy.alerts and j.measured_again and latency.outcome == "unclear", j.changes
    assert "machine busy: load 0% of" in latency.detail and "95% of" in latency.detail
    assert "latency not judged" in busy.paths.markdown.read_text()

    double["busy"] = 0.0  # still slower, on a quiet machine: against n2, the last night timed under a comparable load
    slow = _night(lab, ws, store, "n3")
    (j,) = slow.alerts
    latency = next(c for c in j.changes if c.metric == "latency")
    assert latency.outcome == "regression" and latency.effect == pytest.approx(0.3, abs=0.05)
    assert j.previous_night == "lab-t-n2b" and "against lab-t-n2a " in latency.detail, latency.detail
    assert j.measured_again and "tonight's" not in latency.detail  # every process reads it: three nights' bar

    double.update(slower=1.0, flips=30)  # 6% of the 500 test samples: beyond the tolerance and the minimum drop
    flipped = _night(lab, ws, store, "n4")
    (j,) = flipped.alerts
    outcomes = {c.metric: c.outcome for c in j.changes}
    assert outcomes["status"] == "newly_failing" and outcomes["accuracy"] == "regression", j.changes
    assert next(c for c in j.changes if c.metric == "accuracy").p_value < 1e-6
    assert j.previous_night == "lab-t-n3"  # slower, but measured and passing: the last good night
    junit = (flipped.paths.junit).read_text()
    assert 'failures="1"' in junit and "accuracy regression" in junit


def test_lab_report_matrix_trends_and_links(double, lenet5_workspace, tmp_path):
    """lab.html over three stored nights of two cells: the nights x cells matrix with regressions first, a trend
    plot per cell with one point per night and an IQR band around p50, and links that resolve to files. (After
    the test above in this file: its cached conversion and the 1-thread cell's context are reused.)"""
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    (tmp_path / "lab.toml").write_text(LAB.replace('name = "t"', 'name = "r"').replace("[matrix]", "[matrix]\nthreads = [1, 2]"))
    lab = load_lab(tmp_path / "lab.toml")
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}")
    for name in ("n1", "n2"):
        run_night(lab, ws, store, name, progress=False, log=lambda s: None)
    double.update(slower=1.3, flips=100, only_threads=2)  # one cell of two regresses, and fails (a bug bundle)
    out = run_night(lab, ws, store, "n3", progress=False, log=lambda s: None)
    assert [j.result.lab.label for j in out.alerts] == ["lenet5 keras->tflite/none on host[lab-double] x2t"]

    page = out.paths.html.read_text()
    matrix = page.split('<section id="matrix">')[1].split("</section>")[0]
    rows = matrix.split('<tr class="cell">')[1:]
    assert len(rows) == 2 and all(len(re.findall(r'<td class="m o-', r)) == 3 for r in rows)  # 2 cells x 3 nights
    assert "x2t" in rows[0] and rows[0].count("o-regression") == 1 and "o-regression" not in rows[1]
    assert 'title="night n3: regression; accuracy' in rows[0]

    trends = page.split('<section id="trends">')[1].split("</section>")[0].split('<div class="trend"')[1:]
    assert len(trends) == 2
    for t in trends:
        p50 = next(svg for svg in t.split("<svg")[1:] if "p50 ms (band" in svg)
        assert p50.count('class="pt"') == 3 and p50.count('class="band"') >= 1

    folder = out.paths.html.parent
    links = re.findall(r'href="([^"#]+)', matrix)
    assert sum("/report.html" in h for h in links) == 6 and sum(h.endswith("README.md") for h in links) == 1
    assert all((folder / h).resolve().is_file() for h in links), [h for h in links if not (folder / h).exists()]
    assert any(h.startswith("../lab-r-n1/") for h in links)  # earlier nights' reports, from tonight's folder
    bundle = next(h for h in links if h.endswith("README.md"))
    assert Path(folder / bundle).resolve().parent.parent.name == "bugs"


def test_a_cell_no_worker_can_take_is_no_worker_within_the_wait(lenet5_workspace, tmp_path):
    from deploytool.lab.labfile import load_lab
    from deploytool.store import SqlAlchemyStore

    fake_target.register()
    try:
        ws, *_ = lenet5_workspace
        (tmp_path / "lab.toml").write_text(LAB.replace('targets = ["host"]', 'targets = ["fake"]')
                                           .replace('formats = ["tflite"]', 'formats = ["onnx"]')
                                           .replace('runtimes = ["lab-double"]', ""))
        lab = load_lab(tmp_path / "lab.toml")
        store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}")
        t = time.perf_counter()
        out = _night(lab, ws, store, "n1", no_worker_timeout_s=3)
        assert time.perf_counter() - t < 120
        (j,) = out.judged
        assert j.result.status == "no_worker" and "fake" in j.result.reason and j.result.failing
    finally:
        fake_target.unregister()


def test_a_converter_registered_by_one_module_runs_in_a_lab_night_and_its_gap_becomes_a_finding(
        lenet5_workspace, tmp_path, monkeypatch):
    """A cell converts in its lab worker's conversion process: a converter that is one module
    (tests/fake_converter.py, named in $DEPLOYTOOL_PLUGINS for the processes the night starts) is a cell like any
    other, and its row says which converter made it. The night then does what a migrate does with its rows: the
    model's weights are said to be random, so the int8 rows' drift is expected, but the fake int8 route (100 added to
    output 0) is far off the real TFLite and onnxruntime int8 routes given the same weights: an upstream candidate
    with a bug bundle, though its cell ran apart from theirs; and the night's rows fold into the store's findings."""
    from deploytool.lab.labfile import load_lab
    from deploytool.store import SqlAlchemyStore
    from deploytool.workspace import Workspace
    from tests import fake_converter
    from tests.kept import keep_conversions_of, kept_lenet5_conversions, seed_conversions

    shared, *_ = lenet5_workspace
    ws = Workspace.open(tmp_path / "ws")  # its own: a lab worker keeps one conversion process per workspace
    shutil.copytree(shared.root / "models", ws.root / "models", dirs_exist_ok=True)  # trained already
    seed_conversions(ws, kept_lenet5_conversions())  # the real int8 files, converted by an earlier session
    fake_converter.register()
    monkeypatch.setenv("DEPLOYTOOL_PLUGINS", "tests.fake_converter")
    try:
        (tmp_path / "lab.toml").write_text(
            LAB.replace('formats = ["tflite"]', 'formats = ["tflite", "onnx", "onnx-fake"]')
            .replace('quantize = ["none"]', 'quantize = ["int8"]')
            .replace('frameworks = ["keras"]', 'frameworks = ["keras"]\nrandom_weights = true')
            .replace("latency_samples = 200", "latency_samples = 5")
            .replace('runtimes = ["lab-double"]', ""))
        lab = load_lab(tmp_path / "lab.toml")
        assert lab.models[0].random_weights
        store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}")
        out = _night(lab, ws, store, "n1")
        keep_conversions_of(ws)
        rows = {j.result.combo.format: j.result for j in out.judged}
        assert set(rows) == {"tflite", "onnx", "onnx-fake"}, rows
        r = rows["onnx-fake"]
        assert r.combo.target == "host" and r.verdict == "fail", r
        assert r.plan.steps == ("onnx_tf", "fake_onnx") and r.artifact.converter == "tf2onnx + fake-onnx"
        stored = {x.combo.format: x for x in store.results_for(out.run_id)}
        t = stored["onnx-fake"].triage
        assert t is not None and t.klass == "upstream" and "the median of the 2 other int8 routes" in t.why, t
        limits = json.loads((ws.root / stored["onnx-fake"].bundle / "bundle.json").read_text())["pass_limits"]
        assert set(limits) == {"mean_abs_error"}, limits
        for fmt in ("tflite", "onnx"):  # the real routes: within tolerance, or expected drift, never a finding
            real = stored[fmt].triage
            assert real is None or real.klass == "expected", (fmt, real)
        (finding,) = [f for f in store.findings() if f.klass == "upstream"]
        assert out.run_id in finding.runs and any("onnx-fake" in e for e in finding.examples), finding
        assert finding.confirmation.get("state") == "confirmed", finding.confirmation  # by its bare reproducer
        assert (ws.finding_dir(finding.id) / "finding.md").is_file()
        _night(lab, ws, store, "n1")  # the same night again: every cell measured already, nothing seen anew
        (again,) = [f for f in store.findings() if f.klass == "upstream"]
        assert again.occurrences == finding.occurrences == 1, (finding, again)
    finally:
        fake_converter.unregister()


def test_a_bad_lab_file_is_one_line_naming_the_field(tmp_path):
    (tmp_path / "lab.toml").write_text(LAB.replace("[matrix]", "[matrix]\nthreads = [0]"))
    r = run_cli("lab", "run", str(tmp_path / "lab.toml"), "--workspace", str(tmp_path / "ws"))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "matrix.threads" in lines[0] and "lab.toml" in lines[0], r.stderr
    r = run_cli("lab", "history", "--workspace", str(tmp_path / "ws"), "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == []


def _driver(lab, ws, db, night, knobs, sigint_ignored: bool = False):
    """`deploytool lab run` in its own process, with the runtime double as a plugin. `sigint_ignored`: started
    as a background job of a non-interactive shell (or a CI runner) starts it, with SIGINT ignored."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "DEPLOYTOOL_PLUGINS": "tests.lab_double_plugin", "LAB_DOUBLE_KNOBS": json.dumps(knobs)}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    return subprocess.Popen([sys.executable, "-m", "deploytool", "lab", "run", str(lab), "--workspace", str(ws),
                             "--db", db, "--night", night, "--quiet"], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=ignore)


def _wait_for(what, check, timeout_s=300.0):
    t = time.monotonic()
    while not check():
        assert time.monotonic() - t < timeout_s, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_killed_driver_resumes_its_night_and_ctrl_c_marks_it_interrupted(lenet5_workspace, tmp_path):
    import signal

    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    lab = tmp_path / "lab.toml"
    lab.write_text(LAB.replace('name = "t"', 'name = "t"\nrepeats = 3')  # three cells (no more threads than cores)
                   .replace("latency_samples = 200", "latency_samples = 5"))  # untimed: resuming is the subject
    db = f"sqlite:///{tmp_path / 'lab.db'}"
    log = tmp_path / "double.log"
    measured = lambda: [ln for ln in log.read_text().splitlines() if ln.startswith("done")] if log.exists() else []

    p = _driver(lab, ws.root, db, "k", {"sleep_s": 2, "log": str(log)})
    _wait_for("the first stored cell", lambda: SqlAlchemyStore(db).results_for("lab-t-k") or p.poll() is not None)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    kept = len(SqlAlchemyStore(db).results_for("lab-t-k"))
    assert 1 <= kept < 3
    p = _driver(lab, ws.root, db, "k", {"log": str(log)})
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert f"{kept} of 3 cells already measured" in out + err
    assert len(measured()) == 3  # the killed driver's finished cells were not measured again

    # Ctrl-C; Ctrl-C to a driver started with SIGINT ignored (a background job: the cause of this test's old
    # flakiness, where the driver ran its night to the end and exited 0); and `kill`
    for night_name, sig, ignored in (("c", signal.SIGINT, False), ("c-bg", signal.SIGINT, True),
                                     ("c-term", signal.SIGTERM, False)):
        before = len(log.read_text().splitlines())
        p = _driver(lab, ws.root, db, night_name, {"sleep_s": 3, "log": str(log)}, sigint_ignored=ignored)
        _wait_for("a cell to start", lambda b=before, p=p: len(log.read_text().splitlines()) > b or p.poll() is not None)
        p.send_signal(sig)
        out, err = p.communicate(timeout=120)
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("INFO: Created TensorFlow Lite")]
        assert p.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], (night_name, err)
        (night,) = [r for r in SqlAlchemyStore(db).list_runs(limit=100) if r.run_id == f"lab-t-{night_name}"]
        assert night.status == "interrupted", night_name


def test_the_embedded_cluster_serves_on_127_0_0_1_and_another_lab_at_8787_is_no_warning(recwarn):
    """Two labs at once (or anything else on Dask's port 8787): the embedded scheduler's HTTP routes take a free
    port of 127.0.0.1, say nothing, and cells still run."""
    import errno
    import socket

    from deploytool.lab.engine import client

    with socket.socket() as taken:
        try:
            taken.bind(("0.0.0.0", 8787))
            taken.listen()
        except OSError as e:  # another program holds it already: the case this test makes
            assert e.errno == errno.EADDRINUSE, e
        with client() as c:
            server = c.cluster.scheduler.http_server
            assert c.submit(sum, [40, 2]).result() == 42
            bound = {s.getsockname()[0] for s in server._sockets.values()}
    assert bound == {"127.0.0.1"}, bound
    assert not [w for w in recwarn if "already in use" in str(w.message)]
