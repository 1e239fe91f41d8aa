"""deploytool/proc/worker.py with real spawned processes: a call returns or raises across the boundary; a process
that exits or is killed is a WorkerLost that says how ("exit code 3", "killed by SIGKILL") with the tail of its
log, and the next call gets a fresh one; a call past its timeout is stopped; an idle worker ends through its exit
hooks, a busy one at once; and a child never outlives its parent, even one killed with SIGKILL (issue 8, item 15:
the parents are small driver scripts, tests/unit/worker_driver.py). The functions run in the child live in the
driver module: they cross the boundary by reference."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from deploytool.proc.worker import Worker, WorkerLost, WorkerTimedOut, describe_exit
from tests.unit import worker_driver as jobs

ROOT = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 5.0


def _gone(pid: int | None) -> bool:
    try:
        return pid is None or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """One worker the well-behaved calls share (each spawn costs a Python start-up)."""
    os.environ["DT_WORKER_KEPT"] = "from the parent"
    try:
        with Worker(jobs.setup, ("set up",), log_path=tmp_path_factory.mktemp("w") / "worker.log",
                    env={"DT_WORKER_TEST": "from env", "DT_WORKER_KEPT": "not this"}) as w:
            yield w
    finally:
        del os.environ["DT_WORKER_KEPT"]


def test_a_call_returns_its_result_from_one_reused_process_set_up_once(worker):
    first = worker.call(jobs.facts)
    assert first == {"pid": worker.pid, "setup": "set up", "env": "from env", "kept": "from the parent"}
    assert first["pid"] != os.getpid()
    assert worker.call(jobs.add, 2, 3) == 5
    assert worker.call(jobs.facts)["pid"] == first["pid"] and worker.spawned == 1


def test_an_exception_in_the_call_is_raised_to_the_caller_and_the_process_lives_on(worker):
    pid = worker.call(os.getpid)
    with pytest.raises(ValueError, match="bad input 7"):
        worker.call(jobs.fail, "bad input 7")
    # the callee's own TimeoutError is its error, not a time-out of the call
    with pytest.raises(TimeoutError, match="the callee's own"):
        worker.call(jobs.raise_timeout_error, timeout=60)
    assert worker.call(os.getpid) == pid


def test_a_process_that_exits_is_described_with_its_exit_code_and_its_output_and_is_replaced(tmp_path):
    log = tmp_path / "logs" / "w.log"  # the folder is made when the worker starts
    with Worker(log_path=log) as w:
        first = w.call(os.getpid)
        with pytest.raises(WorkerLost) as e:
            w.call(jobs.say_then_exit, 3)
        assert e.value.how == "exit code 3" and _gone(first)
        # its stdout and stderr (Python's and a native library's) went to the log, whose tail explains the end
        text = log.read_text()
        assert "stdout line from the child" in text and "stderr line from the child" in text
        assert e.value.log_tail.endswith("native stderr line") and "native stderr line" in str(e.value)
        assert w.call(os.getpid) not in (None, first) and w.spawned == 2


def test_a_process_killed_with_sigkill_is_described_so(tmp_path):
    with Worker() as w:
        with pytest.raises(WorkerLost) as e:
            w.call(jobs.kill_myself)
        assert e.value.how == "killed by SIGKILL" and e.value.log_tail == ""  # no log: nothing to quote
        pid = w.call(os.getpid)
        assert w.kill() == "killed by SIGKILL" and _gone(pid) and w.pid is None
        assert w.kill() == "not running"
    assert describe_exit(-15) == "killed by SIGTERM" and describe_exit(0) == "exit code 0"


def test_a_sigkill_the_out_of_memory_killer_counted_is_named_its(monkeypatch):
    """/proc/vmstat's oom_kill counting one more kill across the call names the kernel's out-of-memory killer (the
    count is made to rise here: the real killer would pick the biggest process on the machine)."""
    from deploytool.proc import worker

    real = worker.oom_kills()
    assert real is None or real >= 0  # this machine's kernel says (Linux >= 4.13), or not at all
    counts = iter([5, 6])
    monkeypatch.setattr(worker, "oom_kills", lambda: next(counts))
    with Worker() as w:
        with pytest.raises(WorkerLost) as e:
            w.call(jobs.kill_myself)
    assert e.value.how.startswith("killed by SIGKILL by the kernel's out-of-memory killer: it needed more memory "
                                  "than this machine's") and e.value.how.endswith(" GiB")
    monkeypatch.setattr(worker, "oom_kills", lambda: 5)  # no kill counted: just the signal
    with Worker() as w:
        with pytest.raises(WorkerLost) as e:
            w.call(jobs.kill_myself)
    assert e.value.how == "killed by SIGKILL"


def test_a_call_past_its_timeout_is_stopped_and_the_next_one_gets_a_fresh_process():
    with Worker() as w:
        pid = w.call(os.getpid)
        t0 = time.monotonic()
        with pytest.raises(WorkerTimedOut) as e:
            w.call(jobs.sleep, 60, timeout=0.5)
        assert time.monotonic() - t0 < 10 and e.value.how == "killed by SIGKILL" and _gone(pid)
        assert w.call(jobs.add, 1, 1) == 2


def test_close_runs_an_idle_workers_exit_hooks_and_flushes_its_output_then_kills_it(tmp_path, monkeypatch):
    """Not an orderly interpreter teardown (1-2 s with TensorFlow loaded): the exit hooks (temporary folders)
    and the output, then SIGKILL."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # the child's stdout block-buffered, as for a user
    marker, log = tmp_path / "exit-hook-ran", tmp_path / "w.log"
    w = Worker(log_path=log)
    w.call(jobs.register_exit_hook, str(marker))
    w.call(jobs.print_unflushed, "buffered line")
    pid = w.pid
    w.close()
    assert marker.exists(), "the worker's exit hooks ran before it ended"
    assert "buffered line" in log.read_text()
    assert _gone(pid) and w.pid is None
    never = Worker()
    never.close()  # never started: nothing is spawned only to be ended
    assert never.spawned == 0


def test_close_kills_a_worker_still_busy_with_a_call_at_once(tmp_path):
    """A caller that gave up on a call (an interrupt) does not wait for its exit hooks behind the call."""
    w = Worker()
    pid = w.call(os.getpid)
    lost: list[BaseException] = []
    started = tmp_path / "started"
    t = threading.Thread(target=lambda: _catch(lost, w.call, jobs.sleep, 60, str(started)), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.02)
    t0 = time.monotonic()
    w.close()
    assert time.monotonic() - t0 < 5 and _gone(pid)
    t.join(10)
    assert len(lost) == 1 and isinstance(lost[0], WorkerLost), lost


def _catch(into: list, fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as e:
        into.append(e)


# -- never outliving the parent -----------------------------------------------------------------------------
class Parent:
    """A driver process (tests/unit/worker_driver.py) and the child it reports."""

    def __init__(self, tmp_path: Path, mode: str):
        self.err = tmp_path / "parent.err"
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.unit.worker_driver", mode], cwd=ROOT,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                                         stdout=subprocess.PIPE, stderr=err)

    def line(self) -> str:
        assert self.proc.stdout is not None  # a pipe
        line = self.proc.stdout.readline().strip()
        assert line, f"the parent ended without saying anything: {self.err.read_text()[-1000:]}"
        return line

    def kill(self, child: int) -> float:
        """SIGKILL the parent; seconds until `child` is gone (inf if it still runs after GONE_WITHIN_S)."""
        assert not _gone(child), "the child must run before its parent is killed"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        t0 = time.monotonic()
        while not _gone(child):
            if time.monotonic() - t0 > GONE_WITHIN_S:
                return float("inf")
            time.sleep(0.02)
        return time.monotonic() - t0

    def clean_up(self, child: int | None = None) -> None:
        """After a failed assertion: kill what this test started, so it does not linger."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if child is not None and not _gone(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["worker", "worker-after-thread"])
def test_the_child_dies_with_its_parent_killed_with_sigkill(tmp_path, mode):
    """Linux's parent-death signal follows the spawning *thread*: a worker first used from a short-lived thread
    must survive that thread's end ("worker-after-thread": both calls in one process), and still die with the
    process."""
    parent, child = Parent(tmp_path, mode), None
    try:
        lines = [parent.line()]
        if mode == "worker-after-thread":
            lines.append(parent.line())
        assert parent.line() == "ready" and len(set(lines)) == 1 and lines[0].startswith("worker "), lines
        child = int(lines[0].split()[1])
        assert parent.kill(child) < GONE_WITHIN_S
    finally:
        parent.clean_up(child)


def test_the_portable_watchdog_alone_ends_an_orphan(tmp_path):
    """Without prctl (as on macOS), the watchdog thread ends a worker whose parent died."""
    parent, child = Parent(tmp_path, "watchdog"), None
    try:
        child = int(parent.line().split()[1])
        assert parent.line() == "ready"
        assert parent.kill(child) < GONE_WITHIN_S
    finally:
        parent.clean_up(child)


def test_a_child_whose_parent_died_before_the_guard_ran_exits_at_once(tmp_path):
    """The race the parent-death signal cannot cover: by the time the child sets it up, the parent is already
    gone (the child was re-parented). The child must end there, before it could take any work."""
    t0 = time.monotonic()
    parent = Parent(tmp_path, "parent-gone-before-guard")
    try:
        assert parent.line() == "exit 1" and time.monotonic() - t0 < 30
    finally:
        parent.clean_up()


def test_relog_sends_a_running_workers_output_to_the_next_log(tmp_path):
    import os

    from deploytool.proc.worker import Worker

    with Worker(log_path=tmp_path / "a.log") as w:
        pid = w.call(os.getpid)
        w.call(os.system, "echo first run")  # the file descriptors, as a native library writes
        w.relog(tmp_path / "b.log")
        w.call(os.system, "echo second run")
        assert w.call(os.getpid) == pid and w.log_tail() == "second run"
    assert "first run" in (tmp_path / "a.log").read_text() and "second run" not in (tmp_path / "a.log").read_text()
    assert "second run" in (tmp_path / "b.log").read_text()
