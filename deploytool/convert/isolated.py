"""Conversions in a child process (a `proc.worker.Worker`), so that a converter that crashes (a segfault in a
native library, an abort, the kernel's OOM killer) or hangs becomes that combination's `conversion_failed` /
`timeout` result instead of the end of the matrix, and TensorFlow's threads and memory stay out of the process
that measures latency. The worker is started once and reused, a dead one replaced; its output (converter
chatter) goes to a log whose tail explains a crash. This module only says what runs in the worker and what its
failures mean to a conversion: it must not convert (`convert` does) nor manage the process (proc.worker does).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

from deploytool.artifact import Artifact
from deploytool.convert import convert
from deploytool.data.feed import Feed
from deploytool.errors import StageFailed
from deploytool.proc.quiet import WORKER_ENV
from deploytool.proc.failures import WorkerLost, WorkerTimedOut

# The frameworks every conversion from a source framework imports (proc.forkserver.PRELOADS): its worker is forked
# from a server that imported them once. Not ONNX or TFLite sources: quantizing an ONNX file imports neither.
PRELOADS = {"keras": ("tensorflow",), "saved_model": ("tensorflow",), "torch": ("torch",)}


def _quiet() -> None:
    warnings.filterwarnings("ignore")


def _convert(source: Artifact, fmt: str, quantize: str, out_dir: str, calibration: Feed | None) -> Artifact:
    print(f"--- convert {source.path} -> {fmt}/{quantize}", flush=True)
    t0 = time.perf_counter()
    try:
        return convert(source, fmt, quantize, Path(out_dir), calibration)
    finally:  # the worker ends without an orderly exit (Worker.close): its chatter is in the log now
        print(f"--- {fmt}/{quantize}: {time.perf_counter() - t0:.1f} s", flush=True)
        sys.stderr.flush()


class IsolatedConverter:
    """`convert(...)` with the same signature and results as deploytool.convert.convert, in `worker`."""

    def __init__(self, log_path: Path, timeout_s: float | None = None, framework: str = ""):
        """`framework`: the source framework of the conversions it will make (what its worker preloads)."""
        self.timeout_s = timeout_s
        # multiprocessing loads with the first converter a run makes, not with every command (bench_user_onnx.py)
        from deploytool.proc.worker import Worker

        self.worker = Worker(_quiet, log_path=Path(log_path), env=WORKER_ENV, preload=PRELOADS.get(framework, ()))

    def convert(self, source: Artifact, fmt: str, quantize: str, out_dir: Path,
                calibration: Feed | None = None) -> Artifact:
        try:
            return self.worker.call(_convert, source, fmt, quantize, str(out_dir), calibration,
                                    timeout=self.timeout_s)
        except WorkerTimedOut:
            raise StageFailed("timeout", f"converting to {fmt}/{quantize} took longer than {self.timeout_s:g} s; "
                                         "the converter was stopped (raise --timeout if it needs longer)") from None
        except WorkerLost as e:
            raise StageFailed("conversion_failed", f"the converter process crashed converting to {fmt}/{quantize} "
                                                   f"({e.how})" + (f"; last output: {e.log_tail}" if e.log_tail
                                                                   else "")) from None

    def kill(self) -> str:
        """Stop the worker now, even mid-conversion (an interrupted run); returns how it ended."""
        return self.worker.kill()

    def close(self) -> None:
        """End the (idle) worker now: every result it made is delivered and its output flushed."""
        self.worker.close()

    def __enter__(self) -> "IsolatedConverter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
