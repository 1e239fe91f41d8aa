"""Parents for test_no_orphans to SIGKILL: each starts real deploytool child
processes, says on stdout what it has done, then waits to be killed.

    python -m tests.integration.orphan_driver convert ARTIFACT_JSON OUT_DIR LOG
        one conversion in the IsolatedConverter worker, from the main thread
    python -m tests.integration.orphan_driver convert-after-thread ARTIFACT_JSON OUT_DIR LOG
        the worker is spawned by a thread that then ends; the main thread
        converts again in the same worker

    python -m tests.integration.orphan_driver forked-after-thread
        a worker forked by a fork server that preloads PyTorch (proc.forkserver), first used from a thread that
        then ends (the server is started by then), then from the main thread; prints "server PID" too

Lines printed: "worker PID" and "ready" once the parent has nothing left to do.
The guards on a plain worker (the watchdog alone, a parent gone before the
guard ran) are tested in tests/unit/test_proc_worker.py.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path


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
        print("worker", conv.worker.pid, flush=True)
        time.sleep(0.5)  # a parent-death signal bound to the ended thread would have fired by now
    conv.convert(art, "tflite", "none", out / "main")
    print("worker", conv.worker.pid, flush=True)
    print("ready", flush=True)
    time.sleep(300)


def _forked() -> None:
    from deploytool.proc.worker import Worker

    worker = Worker(preload=("torch",))
    t = threading.Thread(target=worker.call, args=(_has_torch,))
    t.start()
    t.join()
    print("worker", worker.pid, flush=True)
    time.sleep(0.5)  # a parent-death signal bound to the ended thread would have fired by now
    assert worker.call(_has_torch), "the server did not preload PyTorch"
    print("worker", worker.pid, flush=True)
    print("server", worker.call(_parent), flush=True)
    print("ready", flush=True)
    time.sleep(300)


def _has_torch() -> bool:
    return "torch" in sys.modules


def _parent() -> int:
    import os

    return os.getppid()


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "convert":
        _convert(rest, first_in_thread=False)
    elif mode == "convert-after-thread":
        _convert(rest, first_in_thread=True)
    elif mode == "forked-after-thread":
        _forked()
    else:
        raise SystemExit(f"unknown mode {mode}")
