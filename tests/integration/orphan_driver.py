"""Parents for test_no_orphans to SIGKILL: each starts real deploytool child
processes, says on stdout what it has done, then waits to be killed.

    python -m tests.integration.orphan_driver convert ARTIFACT_JSON OUT_DIR LOG
        one conversion in the IsolatedConverter worker, from the main thread
    python -m tests.integration.orphan_driver convert-after-thread ARTIFACT_JSON OUT_DIR LOG
        the worker is spawned by a thread that then ends; the main thread
        converts again in the same worker
    python -m tests.integration.orphan_driver watchdog
        a plain spawned child guarded only by the portable watchdog (no prctl)
    python -m tests.integration.orphan_driver parent-gone-before-guard
        a spawned child told its parent is a pid that is not its parent: the
        state after a parent that died before the guard ran; prints its exit code

Lines printed: "worker PID" and "ready" once the parent has nothing left to do.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path


def _worker_pid(conv) -> int:
    return next(iter(conv._pool._processes))  # the one worker of its pool


def _convert(args: list[str], first_in_thread: bool) -> None:
    from deploytool.artifact import Artifact
    from deploytool.convert.isolated import IsolatedConverter

    art = Artifact.from_json(json.loads(Path(args[0]).read_text()))
    out, log = Path(args[1]), Path(args[2])
    conv = IsolatedConverter(log, timeout_s=120)
    if first_in_thread:
        t = threading.Thread(target=conv.convert, args=(art, "tflite", "none", out / "in-thread"))
        t.start()
        t.join()
        print("worker", _worker_pid(conv), flush=True)
        time.sleep(0.5)  # a parent-death signal bound to the ended thread would have fired by now
    conv.convert(art, "tflite", "none", out / "main")
    print("worker", _worker_pid(conv), flush=True)
    print("ready", flush=True)
    time.sleep(300)


def _guarded_sleep(parent_pid: int) -> None:
    from deploytool.convert.isolated import exit_when_parent_dies

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
    from deploytool.convert.isolated import exit_when_parent_dies

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
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "convert":
        _convert(rest, first_in_thread=False)
    elif mode == "convert-after-thread":
        _convert(rest, first_in_thread=True)
    elif mode == "watchdog":
        _watchdog()
    elif mode == "parent-gone-before-guard":
        _parent_gone_before_guard()
    else:
        raise SystemExit(f"unknown mode {mode}")
