"""The lab on a real Dask cluster: a plain `dask scheduler` and `dask worker`
processes on 127.0.0.1 with different resources. One worker owns the simulated
phone (the ADB device simulator, a TEST DOUBLE), one owns Chromium (a real
headless browser cell: TFLite in tfjs-tflite), one owns `host`, whose cells run
the lab's runtime double. A night pins each cell to the worker owning its
resource (recorded in the row), a worker SIGKILLed mid-cell ends in a retry on a
worker that has the resource, and a phone no worker owns is `no_worker` within
the bounded wait."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.test_android import BENCHMARK_MODEL_DOUBLE, _free_port, adb_server, phone  # noqa: F401
from tests.integration.test_lab import LAB

SMALL = LAB.replace("latency_samples = 200", "latency_samples = 5").replace("test_samples = 500", "test_samples = 200")

pytestmark = [pytest.mark.android, pytest.mark.slow]

DASK = str(Path(sys.executable).with_name("dask"))


def _wait(what, check, timeout_s=60.0):
    t = time.monotonic()
    while time.monotonic() - t < timeout_s:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    def __init__(self, log: Path):
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.log = log
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
        # its HTTP routes (served even with --no-dashboard) on a free port of 127.0.0.1: at Dask's default, every
        # interface's 8787, they took the port test_lab.py's two-labs test binds when both ran at once
        self._start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                                  "--no-dashboard", "--dashboard-address", "127.0.0.1:0", "--no-show"])

    def _start(self, name: str, argv: list[str], knobs: dict | None = None) -> None:
        env = {**self.env, "LAB_DOUBLE_KNOBS": json.dumps({"log": str(self.log), **(knobs or {})})}
        out = open(self.log.with_name(f"{name}.log"), "w")
        self.procs[name] = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)

    def worker(self, name: str, resources: str, **knobs) -> None:
        self._start(name, [DASK, "worker", self.address, "--name", name, "--nthreads", "1", "--no-nanny",
                           "--no-dashboard", "--resources", resources, "--preload", "tests.lab_double"], knobs)

    def client(self):
        from distributed import Client

        return Client(self.address, timeout=30)

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _lines(log: Path, word: str) -> list[str]:
    return [ln.split()[1] for ln in log.read_text().splitlines() if ln.startswith(word)] if log.exists() else []


def _convert_once(ws, tmp_path):
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore
    (tmp_path / "warm.toml").write_text(SMALL)
    run_night(load_lab(tmp_path / "warm.toml"), ws, SqlAlchemyStore(f"sqlite:///{tmp_path / 'warm.db'}"), "warm",
              progress=False, log=lambda s: None)


@pytest.fixture
def double():
    from tests import lab_double

    lab_double.register()  # the driver plans cells of the runtime by name
    yield
    lab_double.unregister()


def test_cells_run_where_their_resource_is_a_killed_worker_is_retried_a_missing_phone_is_no_worker(
        lenet5_workspace, phone, double, tmp_path):  # noqa: F811
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    text = SMALL.replace('targets = ["host"]', 'targets = ["host", "android", "web"]') + \
        f'\n[target_options.android]\ndevices = ["{phone.serial}", "no-such-phone"]\n' \
        f'benchmark_binary = "{BENCHMARK_MODEL_DOUBLE}"\n'
    (tmp_path / "lab.toml").write_text(text)
    lab = load_lab(tmp_path / "lab.toml")
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}")
    # the artifact and the PC baseline made once here: two workers would make them into the same folders at once
    _convert_once(ws, tmp_path)
    log = tmp_path / "double.log"
    cluster = Cluster(log)
    try:
        cluster.worker("phone-host", f"android-{phone.serial}=1")
        cluster.worker("browser-host", "chromium=1")  # its web cell runs while host-b holds its own
        cluster.worker("host-b", "host=1", sleep_s=60)  # holds its cell until it is killed
        with cluster.client() as c:
            _wait("three workers", lambda: len(c.scheduler_info(n_workers=-1)["workers"]) == 3)
            done: dict = {}

            def night_thread():
                try:
                    done["out"] = run_night(lab, ws, store, "n1", cluster.address, progress=False, log=lambda s: None,
                                            no_worker_timeout_s=3)
                except BaseException as e:  # shown by the assertion below
                    done["error"] = e

            night = threading.Thread(target=night_thread)
            t0 = time.monotonic()
            night.start()
            victim = cluster.procs["host-b"]
            _wait("host-b to start its cell", lambda: "error" in done or str(victim.pid) in _lines(log, "start"), 120)
            assert "error" not in done, done
            cluster.worker("host-b2", "host=1")
            _wait("host-b2", lambda: "host-b2" in {w["name"] for w in c.scheduler_info(n_workers=-1)["workers"].values()})
            victim.send_signal(signal.SIGKILL)
            night.join(120)
            assert not night.is_alive()
            seconds = time.monotonic() - t0
    finally:
        cluster.close()
    assert "out" in done, done
    out = done["out"]
    rows = {(r.combo.target, r.combo.device): r for r in (j.result for j in out.judged)}
    host = rows[("host", "")]
    assert host.status == "measured" and host.lab.worker == "host-b2", host.lab  # retried
    on_phone = rows[("android", phone.serial)]
    assert on_phone.status == "measured", on_phone.reason
    assert on_phone.lab.worker == "phone-host", on_phone.lab
    in_browser = rows[("web", "")]
    assert in_browser.status == "measured", in_browser.reason
    assert in_browser.lab.worker == "browser-host" and in_browser.environment["browser_version"]
    missing = rows[("android", "no-such-phone")]
    assert missing.status == "no_worker" and "android-no-such-phone" in missing.reason
    assert _lines(log, "done") == [str(cluster.procs["host-b2"].pid)]  # the killed cell was measured once, by b2
    assert seconds < 120
