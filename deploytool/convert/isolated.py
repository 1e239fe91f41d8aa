"""Conversions in a child process. A converter that crashes (a segfault in a
native library, an abort, the kernel's OOM killer) or hangs then becomes that
combination's `conversion_failed` / `timeout` result instead of the end of the
matrix, and TensorFlow's threads and memory stay out of the process that
measures latency. The worker is started once ("spawn", never fork: the parent
may already hold TensorFlow's threads) and reused; a dead one is replaced.
Its stderr (converter chatter) goes to a log file whose tail explains a crash.
This module only moves work across the process boundary; `convert` does it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.errors import StageFailed


def _init_worker(log_path: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    import warnings

    warnings.filterwarnings("ignore")


def _convert(source: Artifact, fmt: str, quantize: str, out_dir: str, calibration: np.ndarray | None) -> Artifact:
    from deploytool.convert import convert

    print(f"--- convert {source.path} -> {fmt}/{quantize}", flush=True)
    return convert(source, fmt, quantize, Path(out_dir), calibration)


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
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_init_worker, initargs=(str(self.log_path),))
        return self._pool

    def _kill(self) -> list[int]:
        """Stop the worker for good; returns the exit codes of its processes."""
        pool, self._pool = self._pool, None
        if pool is None:
            return []
        procs = list(getattr(pool, "_processes", {}).values())
        for p in procs:
            if p.is_alive():
                p.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        return [p.exitcode for p in procs if p.exitcode is not None]

    def convert(self, source: Artifact, fmt: str, quantize: str, out_dir: Path,
                calibration: np.ndarray | None = None) -> Artifact:
        future = self._start().submit(_convert, source, fmt, quantize, str(out_dir), calibration)
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            self._kill()
            raise StageFailed("timeout", f"converting to {fmt}/{quantize} took longer than {self.timeout_s:g} s; "
                                         "the converter was stopped (raise --timeout if it needs longer)") from None
        except BrokenProcessPool:
            codes = self._kill()
            how = ", ".join(_describe_exit(c) for c in codes) or "it died"
            tail = _tail(self.log_path)
            raise StageFailed("conversion_failed", f"the converter process crashed converting to {fmt}/{quantize} "
                                                   f"({how})" + (f"; last output: {tail}" if tail else "")) from None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "IsolatedConverter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
