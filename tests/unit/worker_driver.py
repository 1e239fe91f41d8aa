"""What tests/unit/test_proc_worker.py runs in a `deploytool.proc.worker.Worker`'s process (module-level functions:
they cross the boundary by reference), and the parents it SIGKILLs: each starts a real child process, says on
stdout what it has done, then waits to be killed.

    python -m tests.unit.worker_driver worker
        a Worker started by one call from the main thread
    python -m tests.unit.worker_driver worker-after-thread
        the Worker is spawned by a call from a thread that then ends; the main thread calls it again
    python -m tests.unit.worker_driver watchdog
        a plain spawned child guarded only by the portable watchdog (no prctl)
    python -m tests.unit.worker_driver parent-gone-before-guard
        a spawned child told its parent is a pid that is not its parent: the state after a parent that died
        before the guard ran; prints its exit code

Lines printed: "worker PID" and "ready" once the parent has nothing left to do.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time

SETUP: dict[str, object] = {}  # in the child: what setup() was given


# -- run in the child ----------------------------------------------------------------------------------------
def setup(value: str) -> None:
    SETUP["value"] = value


def facts() -> dict[str, object]:
    return {"pid": os.getpid(), "setup": SETUP.get("value"), "env": os.environ.get("DT_WORKER_TEST"),
            "kept": os.environ.get("DT_WORKER_KEPT")}


def add(a: int, b: int) -> int:
    return a + b


def fail(message: str) -> None:
    raise ValueError(message)


def say_then_exit(code: int) -> None:
    print("stdout line from the child", flush=True)
    sys.stderr.write("stderr line from the child\n")
    sys.stderr.flush()
    os.write(2, b"native stderr line\n")  # as a C library writes: straight to file descriptor 2
    os._exit(code)


def kill_myself() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def sleep(seconds: float, started: str | None = None) -> None:
    if started is not None:
        open(started, "w").close()  # the call runs now
    time.sleep(seconds)


def raise_timeout_error() -> None:
    raise TimeoutError("the callee's own time-out")


def register_exit_hook(path: str) -> None:
    import atexit
    from pathlib import Path

    atexit.register(Path(path).touch)


def print_unflushed(text: str) -> None:
    print(text)  # block-buffered (stdout is a file): only an orderly end or the exit hooks flush it


# -- the parents ---------------------------------------------------------------------------------------------
def _worker(first_in_thread: bool) -> None:
    from deploytool.proc.worker import Worker

    worker = Worker(setup, ("parent-driver",))
    if first_in_thread:
        t = threading.Thread(target=worker.call, args=(os.getpid,))
        t.start()
        t.join()
        print("worker", worker.call(os.getpid), flush=True)
        time.sleep(0.5)  # a parent-death signal bound to the ended thread would have fired by now
    print("worker", worker.call(os.getpid), flush=True)
    print("ready", flush=True)
    time.sleep(300)


def _guarded_sleep(parent_pid: int) -> None:
    from deploytool.proc.worker import exit_when_parent_dies

    exit_when_parent_dies(parent_pid, death_signal=False)
    time.sleep(300)


def _watchdog() -> None:
    p = multiprocessing.get_context("spawn").Process(target=_guarded_sleep, args=(os.getpid(),))
    p.start()
    print("worker", p.pid, flush=True)
    time.sleep(1.0)  # let the child start its watchdog
    print("ready", flush=True)
    time.sleep(300)


def _guard_then_say_so(parent_pid: int) -> None:
    from deploytool.proc.worker import exit_when_parent_dies

    exit_when_parent_dies(parent_pid)
    print("guard returned", flush=True)  # it must not: the worker would go on to take work
    time.sleep(300)


def _parent_gone_before_guard() -> None:
    # Our own parent's pid stands for the dead parent: the child's getppid() is not it.
    p = multiprocessing.get_context("spawn").Process(target=_guard_then_say_so, args=(os.getppid(),))
    p.start()
    p.join(60)
    print("exit", p.exitcode, flush=True)
    if p.exitcode is None:
        p.kill()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "worker":
        _worker(first_in_thread=False)
    elif mode == "worker-after-thread":
        _worker(first_in_thread=True)
    elif mode == "watchdog":
        _watchdog()
    elif mode == "parent-gone-before-guard":
        _parent_gone_before_guard()
    else:
        raise SystemExit(f"unknown mode {mode}")
