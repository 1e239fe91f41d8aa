"""Worker processes forked from a server that has imported their framework once.

A spawned worker starts a fresh interpreter and imports its framework: TensorFlow costs 4.7 s of CPU every time,
PyTorch 2.2 s. One run starts several workers of one framework (the PC baseline's runtime, the pairing workers that
time a row against it, TensorFlow's own interpreter, a retried row), and a process that runs many runs (the atlas,
a lab driver, a test session) starts dozens. Such workers are forked here from a *server*: a process spawned once,
which imports the framework and then forks one child per worker, so each worker starts with it imported.

This is multiprocessing's "forkserver" start method (its server loop, its children: `spawn.prepare` gives them the
caller's sys.path, working folder and main module), with one server per preload and import-time settings rather
than its one global server, whose preload list is fixed when it first starts, and with a start of our own:
- the server sets its workers' environment (where the caller's does not say otherwise) before it imports, and
  imports TensorFlow quietly (its native log lines would reach the caller's terminal through its inherited stderr);
- it ends with the caller, even one killed with SIGKILL (Linux's parent-death signal, so it must be started from a
  thread that lasts: proc.worker starts it there), and its children with it (proc.worker.exit_when_parent_dies);
- workers whose import-time settings differ (a TensorFlow log level, a thread count) have servers of their own.

The server forks from its main thread, while the threads that importing TensorFlow or PyTorch leaves behind wait
idle on a condition variable, holding no lock a child could inherit.
"""

from __future__ import annotations

import gc
import importlib
import io
import os
import signal
import socket
import sys
import threading
from multiprocessing import connection, forkserver, popen_forkserver, process, reduction, resource_tracker, spawn
from multiprocessing import util as _util
from multiprocessing.context import ForkServerContext, set_spawning_popen
from typing import Any, Iterable, Mapping

from deploytool.proc.quiet import import_tensorflow

# The frameworks a server can import for its workers (TensorFlow quietly: `serve`), in the order it imports them.
PRELOADS = ("tensorflow", "torch")

# Environment variables read when a framework is imported (its threads, logging, optional features): the children of
# a server share what it imported under its settings, so other settings are another server (or none).
_IMPORT_TIME_ENV = ("TF_", "TFDF_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "CUDA_", "XLA_", "PYTORCH_", "TORCH_",
                    "KERAS_", "JAX_", "PYTHON")

# prctl(2) option: the signal the kernel sends us when our parent ends.
_PR_SET_PDEATHSIG = 1

# multiprocessing's helpers for starting a server (typeshed describes its public surface only)
util: Any = _util

_lock = threading.Lock()
_contexts: dict[str, "_Context"] = {}


def context(frameworks: Iterable[str], env: Mapping[str, str], modules: Iterable[str] = ()) -> "_Context | None":
    """The multiprocessing context (ProcessPoolExecutor's mp_context) whose server has imported `frameworks` (of
    PRELOADS), then `modules` (what the worker runs: each fork would import them again), for a worker whose
    environment adds `env` to this process's (None: no framework to preload, spawn it)."""
    asked = set(frameworks)
    preload = tuple(f for f in PRELOADS if f in asked)
    if not preload:
        return None
    preload += tuple(sorted(set(modules) - set(preload)))
    key = repr((preload, sorted(_import_time({**env, **os.environ}).items())))
    with _lock:
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = _contexts[key] = _Context(key, preload, dict(env))
        return ctx


def server_pids() -> set[int]:
    """The pids of this process's servers that have been started (they run until it ends, ready for more)."""
    with _lock:
        return {pid for ctx in _contexts.values() if (pid := ctx.server._forkserver_pid) is not None}


def _import_time(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_IMPORT_TIME_ENV)}


class _Server(forkserver.ForkServer):
    """multiprocessing's ForkServer, started as `serve` below: its preload imported in `env`, tied to us."""

    _lock: threading.Lock
    _forkserver_pid: int | None
    _forkserver_alive_fd: int | None
    _forkserver_address: Any

    def __init__(self, preload: tuple[str, ...], env: dict[str, str]) -> None:
        super().__init__()
        self.preload, self.env = preload, env

    def ensure_running(self) -> None:
        """Start the server unless it runs (again, if it died). Called where its parent-death signal may be bound:
        the main thread or proc.worker's lasting one."""
        with self._lock:
            resource_tracker.ensure_running()  # the children's semaphores are registered with ours
            if self._forkserver_pid is not None:
                if os.waitpid(self._forkserver_pid, os.WNOHANG)[0] == 0:
                    return  # still running
                if self._forkserver_alive_fd is not None:
                    os.close(self._forkserver_alive_fd)
                self._forkserver_address = self._forkserver_alive_fd = self._forkserver_pid = None
            sys_path = spawn.get_preparation_data("server")["sys_path"]
            with socket.socket(socket.AF_UNIX) as listener:
                address = connection.arbitrary_address("AF_UNIX")  # type: ignore[attr-defined]
                listener.bind(address)
                if not util.is_abstract_socket_namespace(address):
                    os.chmod(address, 0o600)
                listener.listen()
                # every child holds the write end of "alive" too: the server reads EOF once we and they are gone
                alive_r, alive_w = os.pipe()
                try:
                    code = (f"from deploytool.proc.forkserver import serve; serve({listener.fileno()}, {alive_r}, "
                            f"{os.getpid()}, {self.preload!r}, {self.env!r}, {sys_path!r})")
                    exe = spawn.get_executable()
                    pid = util.spawnv_passfds(exe, [exe, *util._args_from_interpreter_flags(), "-c", code],
                                              [listener.fileno(), alive_r])
                except BaseException:
                    os.close(alive_w)
                    raise
                finally:
                    os.close(alive_r)
            self._forkserver_address, self._forkserver_alive_fd, self._forkserver_pid = address, alive_w, pid


class _Context(ForkServerContext):
    def __init__(self, key: str, preload: tuple[str, ...], env: dict[str, str]) -> None:
        super().__init__()
        self.key = key
        self.server = _Server(preload, env)

    def Process(self, *args: Any, **kwargs: Any) -> "_ServerProcess":  # type: ignore[override]
        p = _ServerProcess(*args, **kwargs)
        p.server_key = self.key
        return p


class _ServerProcess(process.BaseProcess):
    """A process its context's server forks (pickled to the child: a module-level class, its key a string)."""

    _start_method = "forkserver"
    server_key = ""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _ServerPopen(process_obj)


class _ServerPopen(popen_forkserver.Popen):
    """multiprocessing's forkserver Popen, asking its process's server instead of the module's global one."""

    _fds: list[int]

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        with _lock:
            server = _contexts[process_obj.server_key].server
        self.sentinel, w = server.connect_to_new_process(self._fds)
        parent_w = os.dup(w)  # kept while the child lives: its multiprocessing.parent_process() sentinel
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


# -- in the server ------------------------------------------------------------------------------------------
def serve(listener_fd: int, alive_r: int, parent_pid: int, preload: tuple[str, ...], env: dict[str, str],
          sys_path: list[str]) -> None:
    """The server's process: end with `parent_pid`, import `preload` (frameworks, then modules of ours) in its
    workers' environment (`env` where ours does not say), then fork one on each request."""
    set_parent_death_signal()
    if os.getppid() != parent_pid:
        os._exit(1)  # the caller is gone already
    sys.path[:] = sys_path
    for key, value in env.items():
        os.environ.setdefault(key, value)
    for name in preload:
        if name == "tensorflow":
            import_tensorflow()
        else:
            importlib.import_module(name)
    # What the imports made (TensorFlow and PyTorch: ~400,000 objects) out of the collector's reach, in us and in
    # every child: a worker's collections then walk only what it made itself (a full one took 0.21 s of CPU, each
    # measured row runs one: runtimes.measure.release_free_memory), and they write to no page of the server's
    # objects, which the children share with it until they write (CPython's advice for a server that forks).
    gc.freeze()
    forkserver.main(listener_fd, alive_r, [])


def set_parent_death_signal() -> None:
    """SIGKILL for this process when the thread that started it ends (Linux; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        # Arguments as unsigned long: prctl is variadic in glibc's header.
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                                ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):  # no prctl in this libc (musl without it)
        pass
