"""One spawned child process that runs work for deploytool (a conversion, a runtime's measurement, a training, a
sweep point), so that a crash, a hang, or a framework's threads and memory stay out of the caller: `Worker`
spawns it (never forks: the caller may hold TensorFlow's threads), ties its life to its parent's (even a parent
killed with SIGKILL), sends its output to a log whose tail explains a crash, kills it on a timeout or on demand
and says how it ended ("killed by SIGKILL", "exit code 3"), replaces a dead one, and ends an idle one at once
(its exit hooks, then SIGKILL). It must not know what runs in it: no model, artifact, converter or runtime, and
nothing of deploytool but `errors`, `workspace`, `provenance` and the fork servers (`proc.forkserver`)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Mapping

from deploytool.errors import OUT_OF_MEMORY, sent_home
from deploytool.proc import forkserver
from deploytool.proc.failures import WorkerLost, WorkerTimedOut

# How long an idle worker's exit hooks may take before it is killed anyway.
EXIT_HOOKS_TIMEOUT_S = 10.0
# How often the watchdog also compares os.getppid() with the parent's pid: the
# parent's pipe alone is not enough if another process inherited its end.
WATCH_INTERVAL_S = 0.5


class Worker:
    """One spawned process that runs `call(fn, *args)` one after another; a context manager (`close()` at exit).

    `setup(*setup_args)` runs in the process when it starts (import a framework, pin threads); `env` is set
    there (without overriding what the environment already says) before it; `log_path`, when given, takes the
    process's stdout and stderr. `fn`, `setup` and the arguments cross the boundary by pickling: module-level
    functions and plain values. The process is started by the first call (or `start()`), and again after one
    that died or was killed. With `preload` (frameworks of proc.forkserver.PRELOADS) it is forked from a server
    that imported them (and `setup`'s module) once for every such worker of this process with the same
    import-time settings; its environment is still this process's at the time it starts, plus `env`.
    """

    def __init__(self, setup: Callable[..., None] | None = None, setup_args: tuple = (), *,
                 log_path: Path | None = None, env: Mapping[str, str] | None = None, preload: tuple[str, ...] = ()):
        self.setup, self.setup_args = setup, tuple(setup_args)
        self.preload = tuple(preload)
        self.log_path = None if log_path is None else Path(log_path)
        self.env = dict(env or {})
        self.spawned = 0  # processes started so far
        self._child: _Child | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The running process's pid (None before it starts and after it ends)."""
        child = self._child
        procs = _processes(child.pool) if child is not None else []
        return procs[0].pid if procs else None

    def start(self) -> None:
        """Start the process now and return at once (its setup runs meanwhile): the next call waits less."""
        child, fresh = self._running()
        if fresh:
            _submit_from_lasting_thread(child.pool, os.getpid)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """`fn(*args)` in the process; returns its result or raises what it raised. The process ending meanwhile
        raises WorkerLost, a call longer than `timeout` seconds WorkerTimedOut; either way the process is gone."""
        child, _ = self._running()
        kills = oom_kills()
        try:
            future = child.last_call = _submit_from_lasting_thread(child.pool, _called, fn, *args)
        except RuntimeError:  # BrokenProcessPool: it died while idle; or another thread has just ended it
            raise WorkerLost(self._end(child), self.log_tail()) from None
        wait([future], timeout=timeout, return_when=FIRST_COMPLETED)
        if not future.done():
            raise WorkerTimedOut(timeout or 0.0, self._end(child))
        try:
            return future.result()
        except (BrokenProcessPool, CancelledError):  # it died, or was killed (by another thread) under the call
            how = self._end(child)
            if "SIGKILL" in how and kills is not None and (oom_kills() or 0) > kills:
                how += f" by {OUT_OF_MEMORY}: it needed more memory than this machine's {_memory_gib():.0f} GiB"
            raise WorkerLost(how, self.log_tail()) from None

    def kill(self) -> str:
        """Stop the process for good now, whatever it is doing; returns how it ended, for a message."""
        with self._lock:
            child, self._child = self._child, None
        return child.end() if child is not None else "not running"

    def close(self) -> None:
        """End the process now. An idle one runs its exit hooks (temporary folders, finalizers) and flushes its
        output, then is killed, without the second or two an interpreter holding TensorFlow or PyTorch takes to
        tear down in order; one still busy with a call its caller gave up on (an interrupt) is killed at once. A
        process that was never started is not started to be ended."""
        with self._lock:
            child, self._child = self._child, None
        if child is None:
            return
        busy = child.last_call is not None and not child.last_call.done()
        if not busy and any(p.is_alive() for p in _processes(child.pool)):
            try:
                child.pool.submit(_run_exit_hooks).result(timeout=EXIT_HOOKS_TIMEOUT_S)
            except Exception:  # a hung or broken worker: killed all the same
                pass
        child.end()

    def relog(self, log_path: Path) -> None:
        """Send the process's output to `log_path` from now on (a worker kept for the next run, which has a log of
        its own); a process started later opens it too."""
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            child = self._child
        if child is not None and any(p.is_alive() for p in _processes(child.pool)):
            _submit_from_lasting_thread(child.pool, _log_to, str(self.log_path)).result()

    def log_tail(self, lines: int = 3) -> str:
        """The last non-empty lines of the log, joined ("" without a log)."""
        if self.log_path is None:
            return ""
        try:
            text = [s.strip() for s in self.log_path.read_text(errors="replace").splitlines() if s.strip()]
        except OSError:
            return ""
        return " | ".join(text[-lines:])[-400:]

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _running(self) -> tuple["_Child", bool]:
        """The current process, made if there is none (True then): it starts on its pool's first submit."""
        with self._lock:
            if self._child is not None:
                return self._child, False
            self._child = _Child(self._spawn())
            self.spawned += 1
            return self._child, True

    def _spawn(self) -> ProcessPoolExecutor:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = None if self.log_path is None else str(self.log_path)
        forked = forkserver.context(self.preload, self.env, () if self.setup is None else (self.setup.__module__,))
        if forked is None:
            return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_start_child,
                                       initargs=(os.getpid(), log, self.env, self.setup, self.setup_args))
        # forked by the server (its child): the environment it runs in is ours now, not the server's at its start
        return ProcessPoolExecutor(max_workers=1, mp_context=forked, initializer=_start_child,
                                   initargs=(None, log, self.env, self.setup, self.setup_args, dict(os.environ)))

    def _end(self, child: "_Child") -> str:
        """Kill `child` after a failed call (the next call starts another); returns how it ended."""
        with self._lock:
            if self._child is child:
                self._child = None
        return child.end()


class _Child:
    """One spawned process, as a one-process pool, and the last call handed to it. Ended once: whoever ends it
    first (a caller whose call failed, `kill`, `close` from another thread) kills it and says how it ended."""

    def __init__(self, pool: ProcessPoolExecutor):
        self.pool = pool
        self.last_call: Future | None = None
        self.how: str | None = None
        self._lock = threading.Lock()

    def end(self) -> str:
        with self._lock:
            if self.how is None:
                self.how = _kill_pool(self.pool)
            return self.how


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot (/proc/vmstat's oom_kill; None
    where the kernel does not say): one more across a call whose worker died by SIGKILL names its killer."""
    try:
        with open("/proc/vmstat") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("oom_kill ")), None)
    except (OSError, ValueError, IndexError):
        return None


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (OSError, ValueError):
        return 0.0


def describe_exit(code: int) -> str:
    """A process's exit code in words: "killed by SIGKILL", "exit code 3"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def exit_when_parent_dies(parent_pid: int, death_signal: bool = True) -> None:
    """Make this (spawned or forked) process end as soon as `parent_pid`, its parent, is gone (a worker forked by a
    fork server: the server, which ends with the process that started it; the watchdog's pipe is that process's).

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
        forkserver.set_parent_death_signal()
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent is gone already; nobody waits for this exit code
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="parent-watchdog", daemon=True).start()


# -- in the child -------------------------------------------------------------------------------------------
def _start_child(parent_pid: int | None, log_path: str | None, env: dict[str, str],
                 setup: Callable[..., None] | None, setup_args: tuple, environ: dict[str, str] | None = None) -> None:
    """A worker's start. `parent_pid`: the process that spawned it (None: forked by a fork server, its parent now);
    `environ`: the environment to run in (a forked one's: the caller's when it made the worker)."""
    exit_when_parent_dies(os.getppid() if parent_pid is None else parent_pid)
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    for key, value in env.items():
        os.environ.setdefault(key, value)
    if log_path is not None:
        _log_to(log_path)
    if setup is not None:
        setup(*setup_args)


def _called(fn: Callable[..., Any], *args: Any) -> Any:
    """In the worker: `fn(*args)`; what it raises goes home without the libraries' classes (errors.sent_home)."""
    try:
        return fn(*args)
    except Exception as e:
        home = sent_home(e)
    raise home  # outside the handler: no context added to it here


def _log_to(log_path: str) -> None:
    """This process's stdout and stderr (the file descriptors: native libraries' output too) into `log_path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _watch_parent(parent_pid: int) -> None:
    parent = multiprocessing.parent_process()
    while os.getppid() == parent_pid:
        if parent is None:
            time.sleep(WATCH_INTERVAL_S)
        else:
            parent.join(WATCH_INTERVAL_S)  # returns early when the parent's end of the pipe closes
            if not parent.is_alive():
                break
    # os._exit, not sys.exit: this is not the main thread, and a call may be
    # running there; the process must end now, without cleanup.
    os._exit(1)


def _run_exit_hooks() -> None:
    import atexit

    atexit._run_exitfuncs()  # temporary folders (onnx2tf runs), weakref finalizers (TemporaryDirectory)
    sys.stdout.flush()  # the process is killed next: what it printed is in the log now
    sys.stderr.flush()


# -- in the parent ------------------------------------------------------------------------------------------
def _processes(pool: ProcessPoolExecutor | None) -> list:
    return list((getattr(pool, "_processes", None) or {}).values())


def _kill_pool(pool: ProcessPoolExecutor) -> str:
    procs = _processes(pool)
    for p in procs:
        if p.is_alive():
            p.kill()
    pool.shutdown(wait=True, cancel_futures=True)
    return ", ".join(describe_exit(p.exitcode) for p in procs if p.exitcode is not None) or "it died"


def _submit_from_lasting_thread(pool: ProcessPoolExecutor, fn: Callable[..., Any], *args: Any) -> Future:
    """`pool.submit(fn, *args)`, called where the worker may be spawned safely.

    ProcessPoolExecutor ("spawn") starts its worker inside the first submit(),
    in the calling thread, and Linux sends the parent-death signal when *that
    thread* ends. The main thread lasts as long as the process; any other
    caller (a Dask task thread, a conversion lane, a short-lived helper) hands
    the submit to one daemon thread that also lasts until the process exits.
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
