"""In-process runtimes (host rows and the PC baseline) measured in a process of
their own, so a row's memory figure is the model's and not an accident of what
the measuring process imported or ran before. One spawned worker (a
`proc.worker.Worker`) per runtime class, reused for a run's rows: its framework
is imported when it starts, and each row's load + run is one measured span. The
figure is that span's peak RSS above the worker's RSS just before it, after
garbage collection and malloc_trim, so a row measures the same alone and inside
a matrix. This module moves a measurement across the process boundary; the
runtimes and measure.py do the measuring, proc.worker runs the process. It
never compares or stores.
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from deploytool import runtimes
from deploytool.artifact import Artifact
from deploytool.data.feed import Batch, Feed
from deploytool.errors import StageFailed
from deploytool.proc.worker import Worker, WorkerLost, WorkerTimedOut
from deploytool.runtimes.base import Outputs, Runtime
from deploytool.runtimes.measure import release_free_memory

# What each figure of an isolated measurement is (the report's legend reads these).
ISOLATED_DELTA = "isolated_peak_rss_delta_bytes"
ISOLATED_IDLE = "isolated_idle_rss_bytes"

# Samples of the unmeasured priming run (at least one whole batch of the batched pass's usual size).
PRIMING_SAMPLES = 256
PRIMING_LATENCY_SAMPLES = 20

# glibc's mallopt(M_MMAP_THRESHOLD): a fixed threshold turns off its dynamic raising, which would
# otherwise let a reused worker keep large freed blocks in its heap (and look cheaper on the next row).
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_BYTES = 128 * 1024

# Set in the worker before its framework is imported.
WORKER_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def _init_worker(ref: str) -> None:
    warnings.filterwarnings("ignore")
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
    except (OSError, AttributeError):
        pass
    _class(ref).import_framework()


def _class(ref: str) -> type[Runtime]:
    import importlib

    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _measure(ref: str, options: dict[str, Any], artifact: Artifact, inputs: Batch) -> Outputs:
    """In the worker: one load + run, its memory taken above the idle RSS just before it.

    The model is first loaded and run once on a few samples, unmeasured: a runtime initialises itself
    lazily (thread pools, kernel registries, the code pages of the kernels this model uses), and
    that would be charged to whichever row came first in this worker.
    """

    cls = _class(ref)
    # The priming run takes the measured run's code path (warm-up, K, the CPU-load check without its wait):
    # a shorter one left ~1.5 MiB of first-use allocations to the first measured row.
    priming = {**options, "latency_samples": PRIMING_LATENCY_SAMPLES, "load_check_s": 0.0}
    with cls(**priming, own_process=True) as primer:
        primer.load(artifact)
        primer.run(inputs[:PRIMING_SAMPLES])
    del primer
    release_free_memory()
    with cls(**options, own_process=True) as rt:
        rt.load(artifact)
        out = rt.run(inputs)
        idle = rt._peak.rss_before_bytes if rt._peak is not None else 0
    delta = out.memory_bytes.pop("process_peak_rss_delta_bytes", None)
    if delta is not None:
        out.memory_bytes[ISOLATED_DELTA] = delta
        out.memory_bytes[ISOLATED_IDLE] = float(idle)
    out.environment["measured_in"] = (f"own process (pid {os.getpid()}), reused for this runtime's rows; the model "
                                      f"loaded and ran once on {min(len(inputs), PRIMING_SAMPLES)} samples before "
                                      "the measured load + run")
    return out


def _ref(cls: type[Runtime]) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class RuntimeWorkers:
    """`measure(cls, options, artifact, inputs) -> Outputs`, each runtime class in its own reused worker."""

    def __init__(self) -> None:
        self._workers: dict[str, Worker] = {}
        self.started = 0  # workers made (a test counts them); a failed one is replaced by a new one

    def _worker(self, ref: str) -> Worker:
        if ref not in self._workers:
            self._workers[ref] = Worker(_init_worker, (ref,), env=WORKER_ENV)
            self.started += 1
        return self._workers[ref]

    def warm(self, cls: type[Runtime]) -> None:
        """Start `cls`'s worker now (its framework imported), without waiting: a run starts its rows'
        workers while the conversions finish, so no row pays a framework's import."""

        ref = _ref(cls)
        if ref not in self._workers:
            self._worker(ref).start()

    def measure(self, cls: type[Runtime], options: dict[str, Any], artifact: Artifact, inputs: Batch) -> Outputs:
        ref, timeout_s = _ref(cls), options.get("timeout_s")
        try:
            return self._worker(ref).call(_measure, ref, dict(options), artifact, inputs, timeout=timeout_s)
        except WorkerTimedOut:
            self._workers.pop(ref, None)
            raise StageFailed("timeout", f"{cls.name} took longer than {timeout_s:g} s to load and run the model; "
                                         "it was stopped (raise --timeout if it needs longer)") from None
        except WorkerLost as e:
            self._workers.pop(ref, None)
            raise StageFailed("runtime_failed", f"the {cls.name} runtime's process crashed loading or running "
                                                f"the model ({e.how})") from None

    def close(self) -> None:
        for ref in list(self._workers):
            self._workers.pop(ref).close()


_open: RuntimeWorkers | None = None


@contextmanager
def runtime_workers() -> Iterator[RuntimeWorkers]:
    """The workers a run's rows share, stopped when it ends. Re-entrant: inside an open one, that one."""
    global _open
    if _open is not None:
        yield _open
        return
    _open = workers = RuntimeWorkers()
    try:
        yield workers
    finally:
        _open = None
        workers.close()


def warm_workers(classes: list[type[Runtime]]) -> None:
    """Start the open run's worker of each in-process runtime class in `classes` (see RuntimeWorkers.warm)."""
    if _open is not None:
        for cls in classes:
            if cls.in_process:
                _open.warm(cls)


def measure_in_own_process(cls: type[Runtime], options: dict[str, Any], artifact: Artifact,
                           inputs: Batch) -> Outputs:
    """Load and run `artifact` on runtime `cls` in its worker: the open run's, else one started for this call."""
    with runtime_workers() as workers:
        return workers.measure(cls, options, artifact, inputs)


def load_and_run(target: str, fmt: str, runtime: str, artifact: Artifact, inputs: Batch,
                 **options: Any) -> Outputs:
    """One row's (or the baseline's) load + run: an in-process runtime in its own worker; a browser or a phone,
    which measure their own process, here."""

    cls = runtimes.runtime_class(target, fmt, runtime)
    if cls.in_process:
        fed = inputs.contiguous() if isinstance(inputs, Feed) else np.ascontiguousarray(inputs, dtype=np.float32)
        return measure_in_own_process(cls, options, artifact, fed)
    with runtimes.make_runtime(target, fmt, runtime, **options) as rt:
        rt.load(artifact)
        return rt.run(inputs)
