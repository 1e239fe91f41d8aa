"""Issue 8, item 15: `kill -9` of a deploytool process leaves nothing behind.
A parent is SIGKILLed (no cleanup code of ours runs) and every process it
started (the TensorFlow conversion worker, multiprocessing's resource tracker,
Playwright's node driver, every Chromium process) must be gone within a few
seconds. The parents are real: small driver scripts around IsolatedConverter
(tests/integration/orphan_driver.py) and `python -m deploytool migrate`. The
guards on a plain worker, without TensorFlow: tests/unit/test_proc_worker.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from deploytool.devices.browser import CONFIG_PREFIX, sweep_stale_config_homes
from tests.conftest import ROOT
from tests.integration.tiny_models import build_keras, digits

pytestmark = pytest.mark.slow

GONE_WITHIN_S = 5.0
DRIVER = "tests.integration.orphan_driver"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    src = build_keras(d, epochs=1)
    (d / "artifact.json").write_text(json.dumps(src.artifact.to_json()))
    x, y = digits()
    np.savez(d / "test.npz", x=x[-64:], y=y[-64:])
    return d


class Family:
    """A parent process we start, and every descendant it has been seen with.
    Orphans are re-parented to init, so descendants are remembered as they
    appear (psutil.Process objects, which are never fooled by a reused pid)."""

    def __init__(self, stderr_path: Path, *args: str):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.stderr_path = stderr_path
        with open(stderr_path, "w") as err:
            self.proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, text=True,
                                         stdout=subprocess.PIPE, stderr=err)
        self.parent = psutil.Process(self.proc.pid)
        self.seen: dict[int, psutil.Process] = {}

    def look(self) -> list[str]:
        """Remember the current descendants; returns their command lines."""
        try:
            for c in self.parent.children(recursive=True):
                self.seen.setdefault(c.pid, c)
        except psutil.NoSuchProcess:
            pass
        return [_cmdline(p) for p in self.alive()]

    def line(self) -> str:
        assert self.proc.stdout is not None  # a pipe
        line = self.proc.stdout.readline().strip()
        assert line, f"the parent ended without saying anything: {self.stderr_tail()}"
        return line

    def stderr_tail(self) -> str:
        return " | ".join(self.stderr_path.read_text(errors="replace").splitlines()[-5:])

    def wait_for(self, cond, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond(self.look()):
            assert self.proc.poll() is None, f"the parent ended on its own: {self.stderr_tail()}"
            assert time.monotonic() < deadline, f"timed out; children: {self.look()}"
            time.sleep(0.05)

    def kill_parent(self) -> float:
        """SIGKILL the parent; seconds until none of its descendants runs (inf if some still do)."""
        self.look()
        assert self.proc.poll() is None, f"the parent ended before it could be killed: {self.stderr_tail()}"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        t0 = time.monotonic()
        while self.alive():
            if time.monotonic() - t0 > GONE_WITHIN_S:
                return float("inf")
            time.sleep(0.02)
        return time.monotonic() - t0

    def alive(self) -> list[psutil.Process]:
        """Descendants still running; a zombie is dead and only waits for init to reap it."""
        out = []
        for p in self.seen.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    def clean_up(self) -> None:
        """After a failed assertion: kill what this test started, so it does not linger."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        # The resource tracker last: once the others are gone it unlinks the
        # semaphores they leaked in /dev/shm and exits by itself.
        for last in (False, True):
            for p in self.alive():
                if last or "resource_tracker" not in _cmdline(p):
                    try:
                        p.kill()
                    except psutil.NoSuchProcess:
                        pass
            psutil.wait_procs(self.alive(), timeout=3)


def _full_cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:120]
    except psutil.Error:
        return f"pid {p.pid}"


def _is_worker(cmd: str) -> bool:
    """A spawned worker, or a fork server (proc.forkserver) and the workers it forked (its command line)."""
    return "spawn_main" in cmd or "deploytool.proc.forkserver import serve" in cmd


def test_the_conversion_worker_dies_with_a_parent_killed_mid_conversion(tiny, tmp_path):
    log = tmp_path / "convert.log"
    fam = Family(tmp_path / "parent.err", "-m", DRIVER, "convert", str(tiny / "artifact.json"), str(tmp_path / "out"),
                 str(log))
    try:
        fam.wait_for(lambda cmds: any(map(_is_worker, cmds)) and log.exists() and "--- convert" in log.read_text())
        cmds = fam.look()
        assert any(map(_is_worker, cmds)) and any("resource_tracker" in c for c in cmds), cmds
        gone_s = fam.kill_parent()
        assert gone_s < GONE_WITHIN_S, f"still running: {[_cmdline(p) for p in fam.alive()]}"
    finally:
        fam.clean_up()


def test_a_worker_spawned_by_an_ended_thread_lives_on_and_still_dies_with_its_process(tiny, tmp_path):
    """Linux's parent-death signal follows the spawning *thread*: a worker first used from a
    short-lived thread must survive that thread's end, and still die with the process."""
    fam = Family(tmp_path / "parent.err", "-m", DRIVER, "convert-after-thread", str(tiny / "artifact.json"),
                 str(tmp_path / "out"), str(tmp_path / "convert.log"))
    try:
        first, second, ready = fam.line(), fam.line(), fam.line()
        assert first == second and first.startswith("worker ") and ready == "ready", (first, second, ready)
        worker = psutil.Process(int(first.split()[1]))
        fam.look()
        assert worker.pid in {c.pid for c in fam.alive()}, fam.stderr_tail()
        gone_s = fam.kill_parent()
        assert gone_s < GONE_WITHIN_S, f"still running: {[_cmdline(p) for p in fam.alive()]}"
    finally:
        fam.clean_up()


def test_a_worker_forked_by_a_fork_server_dies_with_the_process_that_started_both(tmp_path):
    """A worker forked by a fork server (proc.forkserver) is the server's child, not ours: the server is started
    from a thread that lasts (the worker was first used from one that ended) and ends with us, its children with
    it, even when we are SIGKILLed."""
    fam = Family(tmp_path / "parent.err", "-m", DRIVER, "forked-after-thread")
    try:
        first, second, server, ready = fam.line(), fam.line(), fam.line(), fam.line()
        assert first == second and first.startswith("worker ") and ready == "ready", (first, second, ready)
        worker, server_pid = int(first.split()[1]), int(server.split()[1])
        assert server_pid not in (worker, fam.proc.pid)
        fam.look()
        assert {worker, server_pid} <= {c.pid for c in fam.alive()}, fam.stderr_tail()
        gone_s = fam.kill_parent()
        assert gone_s < GONE_WITHIN_S, f"still running: {[_cmdline(p) for p in fam.alive()]}"
    finally:
        fam.clean_up()


@pytest.mark.browser
def test_kill_9_of_migrate_during_a_web_row_leaves_no_process_behind(tiny, tmp_path):
    """The real CLI: the conversion worker, the resource tracker, Playwright's node driver (it
    exits on EOF of its stdin) and Chromium (it exits when its pipe to the driver closes)."""
    fam = Family(tmp_path / "parent.err", "-m", "deploytool", "migrate", "--model", str(tiny / "tiny.keras"),
                 "--data", str(tiny / "test.npz"), "--target", "web", "--format", "tflite", "--quantize", "none",
                 "--workspace", str(tmp_path / "ws"), "--quiet")
    try:
        fam.wait_for(lambda cmds: any("--type=renderer" in c for c in cmds))
        time.sleep(0.5)  # the harness page is loading the model now
        cmds = fam.look()
        assert any(map(_is_worker, cmds)), cmds
        assert any("playwright" in c and "node" in c for c in cmds), cmds
        assert any("chromium" in c and "--type=" not in c for c in cmds), cmds
        # the run's browser profile (its HTTP and code caches): Playwright's driver deletes it as it exits
        profiles = {a.split("=", 1)[1] for p in fam.alive() for a in _full_cmdline(p) if a.startswith("--user-data-dir=")}
        assert profiles and all(Path(p).is_dir() for p in profiles), cmds
        gone_s = fam.kill_parent()
        assert gone_s < GONE_WITHIN_S, f"still running: {[_cmdline(p) for p in fam.alive()]}"
        deadline = time.monotonic() + GONE_WITHIN_S
        while any(Path(p).exists() for p in profiles) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(Path(p).exists() for p in profiles), f"the killed run's browser profile is left: {profiles}"
        # its browser's config home, which the killed process could not remove, goes at the next launch
        homes = list(Path(tempfile.gettempdir()).glob(f"{CONFIG_PREFIX}{fam.proc.pid}-*"))
        assert len(homes) == 1, homes
        deadline = time.monotonic() + GONE_WITHIN_S  # a crash handler still naming it keeps it a moment longer
        while homes[0].exists() and time.monotonic() < deadline:
            sweep_stale_config_homes()
            time.sleep(0.05)
        assert not homes[0].exists(), f"the killed run's browser config home is left: {homes[0]}"
    finally:
        fam.clean_up()
