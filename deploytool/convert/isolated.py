"""Conversions in a child process. A converter that crashes (a segfault in a
native library, an abort, the kernel's OOM killer) or hangs then becomes that
combination's `conversion_failed` / `timeout` result instead of the end of the
matrix, and TensorFlow's threads and memory stay out of the process that
measures latency. The worker is started once ("spawn", never fork: the parent
may already hold TensorFlow's threads) and reused; a dead one is replaced.
Its stderr (converter chatter) goes to a log file whose tail explains a crash.
The worker never outlives this process, even one killed with SIGKILL: it
holds TensorFlow (hundreds of MB) and nobody would ever read its result.
This module only moves work across the process boundary; `convert` does it.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable

import numpy as np

from deploytool.artifact import Artifact
from deploytool.convert import convert
from deploytool.errors import StageFailed

# prctl(2) option: the signal the kernel sends us when our parent ends.
_PR_SET_PDEATHSIG = 1
# How long an idle worker's exit hooks may take before it is killed anyway.
EXIT_HOOKS_TIMEOUT_S = 10.0
# How often the watchdog also compares os.getppid() with the parent's pid: the
# parent's pipe alone is not enough if another process inherited its end.
WATCH_INTERVAL_S = 0.5


def exit_when_parent_dies(parent_pid: int, death_signal: bool = True) -> None:
    """Make this (spawned) process end as soon as `parent_pid`, its parent, is gone.

    Three guards, because each one alone has a hole:
    - Linux's parent-death signal (SIGKILL) is delivered by the kernel, so it
      works even while a converter holds the GIL in native code; but it only
      covers deaths after prctl ran, and fires when the parent *thread* that
      spawned us ends (see `_submit_from_lasting_thread`);
    - comparing os.getppid() with `parent_pid` covers a parent that died before
      prctl ran (we have already been re-parented then);
    - a watchdog thread covers every platform: it waits for EOF on the pipe
      that multiprocessing keeps open from the parent (`parent_process()`),
      and polls os.getppid() in case that pipe was inherited by someone else.
    """
    if death_signal:
        _set_parent_death_signal()
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent is gone already; nobody waits for this exit code
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watchdog", daemon=True).start()


def _set_parent_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        # Arguments as unsigned long: prctl is variadic in glibc's header.
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                                ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):  # no prctl in this libc (musl without it): the watchdog still guards
        pass


def _watch_parent(parent_pid: int) -> None:
    parent = multiprocessing.parent_process()
    while os.getppid() == parent_pid:
        if parent is None:
            time.sleep(WATCH_INTERVAL_S)
        else:
            parent.join(WATCH_INTERVAL_S)  # returns early when the parent's end of the pipe closes
            if not parent.is_alive():
                break
    # os._exit, not sys.exit: this is not the main thread, and a conversion may
    # be running there; the process must end now, without cleanup.
    os._exit(1)


def _init_worker(log_path: str, parent_pid: int) -> None:
    exit_when_parent_dies(parent_pid)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    import warnings

    warnings.filterwarnings("ignore")


def _convert(source: Artifact, fmt: str, quantize: str, out_dir: str, calibration: np.ndarray | None) -> Artifact:
    print(f"--- convert {source.path} -> {fmt}/{quantize}", flush=True)
    t0 = time.perf_counter()
    try:
        return convert(source, fmt, quantize, Path(out_dir), calibration)
    finally:  # the worker ends without an orderly exit (end_idle_pool): its chatter is in the log now
        print(f"--- {fmt}/{quantize}: {time.perf_counter() - t0:.1f} s", flush=True)
        sys.stderr.flush()


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = [s.strip() for s in path.read_text(errors="replace").splitlines() if s.strip()]
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-400:]


class IsolatedConverter:
    """`convert(...)` with the same signature and results as deploytool.convert.convert."""

    def __init__(self, log_path: Path, timeout_s: float | None = None):
        self.log_path = Path(log_path)
        self.timeout_s = timeout_s
        self._pool: ProcessPoolExecutor | None = None

    def _start(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._pool = spawn_pool(_init_worker, (str(self.log_path), os.getpid()))
        return self._pool

    def _kill(self) -> str:
        """Stop the worker for good; returns how its processes ended."""
        pool, self._pool = self._pool, None
        return kill_pool(pool)

    def convert(self, source: Artifact, fmt: str, quantize: str, out_dir: Path,
                calibration: np.ndarray | None = None) -> Artifact:
        try:
            future = _submit_from_lasting_thread(self._start(), _convert, source, fmt, quantize, str(out_dir),
                                                 calibration)
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            self._kill()
            raise StageFailed("timeout", f"converting to {fmt}/{quantize} took longer than {self.timeout_s:g} s; "
                                         "the converter was stopped (raise --timeout if it needs longer)") from None
        except BrokenProcessPool:
            how = self._kill()
            tail = _tail(self.log_path)
            raise StageFailed("conversion_failed", f"the converter process crashed converting to {fmt}/{quantize} "
                                                   f"({how})" + (f"; last output: {tail}" if tail else "")) from None

    def close(self) -> None:
        """End the (idle) worker now: every result it made is delivered and its output flushed."""
        pool, self._pool = self._pool, None
        end_idle_pool(pool)

    def __enter__(self) -> "IsolatedConverter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spawn_pool(initializer: Callable[..., None], initargs: tuple) -> ProcessPoolExecutor:
    """One spawned worker process, set up by `initializer(*initargs)` and reused until it is killed or closed."""
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=initializer, initargs=initargs)


def _run_exit_hooks() -> None:
    import atexit

    atexit._run_exitfuncs()  # our temporary folders (onnx2tf runs), weakref finalizers (TemporaryDirectory)


def end_idle_pool(pool: ProcessPoolExecutor | None) -> None:
    """Stop a worker whose results are all delivered without waiting for its interpreter to tear down: a
    process holding TensorFlow or PyTorch takes 1-2 s to exit in order (module teardown, thread joins), while
    its exit hooks, which remove its temporary files, take milliseconds. Those run first, then it is killed."""
    if pool is None:
        return
    if any(p.is_alive() for p in getattr(pool, "_processes", {}).values()):  # never spawn one only to end it
        try:
            pool.submit(_run_exit_hooks).result(timeout=EXIT_HOOKS_TIMEOUT_S)
        except Exception:  # a hung or broken worker: killed all the same
            pass
    kill_pool(pool)


def kill_pool(pool: ProcessPoolExecutor | None) -> str:
    """Kill a pool's worker for good (a timeout, a crash); returns how its processes ended, for a message."""
    if pool is None:
        return "it died"
    procs = list(getattr(pool, "_processes", {}).values())
    for p in procs:
        if p.is_alive():
            p.kill()
    pool.shutdown(wait=True, cancel_futures=True)
    return ", ".join(_describe_exit(p.exitcode) for p in procs if p.exitcode is not None) or "it died"


def _submit_from_lasting_thread(pool: ProcessPoolExecutor, fn: object, *args: object) -> Future:
    """`pool.submit(fn, *args)`, called where the worker may be spawned safely.

    ProcessPoolExecutor ("spawn") starts its worker inside the first submit(),
    in the calling thread, and Linux sends the parent-death signal when *that
    thread* ends. The main thread lasts as long as the process; any other
    caller (a Dask task thread, a short-lived helper) hands the submit to one
    daemon thread that also lasts until the process exits.
    """
    if threading.current_thread() is threading.main_thread():
        return pool.submit(fn, *args)
    done: Future = Future()
    _lasting_thread_jobs().put((lambda: pool.submit(fn, *args), done))
    return done.result()


_spawner_lock = threading.Lock()
_spawner: tuple[int, "queue.Queue"] | None = None  # (pid that started the thread, its job queue)


def _lasting_thread_jobs() -> "queue.Queue":
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():  # a forked copy of us has no such thread
            jobs: queue.Queue = queue.Queue()
            threading.Thread(target=_serve, args=(jobs,), name="deploytool-spawner", daemon=True).start()
            _spawner = (os.getpid(), jobs)
        return _spawner[1]


def _serve(jobs: "queue.Queue") -> None:
    while True:
        call, done = jobs.get()
        try:
            done.set_result(call())
        except BaseException as e:  # handed back to the caller, who raises it
            done.set_exception(e)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
