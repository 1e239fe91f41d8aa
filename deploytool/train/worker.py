"""The spawned process a model trains in. It is fresh, so TensorFlow's thread pools get the requested size
before TensorFlow starts (PyTorch gets the same count), and its peak memory is the training's, not the
caller's. One worker serves one framework at one thread count and may train several models in a row (a study's
seeds); it ends with its caller. It only moves training across the process boundary: deploytool.train trains.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from deploytool.convert.isolated import (
    _submit_from_lasting_thread,
    end_idle_pool,
    exit_when_parent_dies,
    kill_pool,
    spawn_pool,
)
from deploytool.errors import TrainingFailed
from deploytool.proc.threads import pin
from deploytool.train.fit import fit_measured

_THREADS: dict[str, Any] = {}  # in the worker: what pinning the threads gave


def _init(framework: str, threads: int, parent_pid: int) -> None:
    # the converter worker's guard: a worker holding a framework never outlives its caller

    exit_when_parent_dies(parent_pid)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # the user's terminal shows the progress bars, not TF's logs
    import warnings

    warnings.filterwarnings("ignore")
    _THREADS.update(pin(framework, threads))


def _fit(spec, framework: str, dataset, epochs: int, path: str, progress: bool) -> dict[str, Any]:
    return fit_measured(spec, framework, dataset, epochs, Path(path), progress, dict(_THREADS))


class TrainWorker:
    """`fit(...)` in a spawned process pinned to `threads` for `framework`; a context manager."""

    def __init__(self, framework: str, threads: int = 1):
        self.framework, self.threads = framework, threads
        self._pool: ProcessPoolExecutor | None = None

    def fit(self, spec, dataset, epochs: int, path: Path, progress: bool) -> dict[str, Any]:
        if self._pool is None:
            self._pool = spawn_pool(_init, (self.framework, self.threads, os.getpid()))
        try:
            return _submit_from_lasting_thread(self._pool, _fit, spec, self.framework, dataset, epochs, str(path),
                                               progress).result()
        except BrokenProcessPool:
            pool, self._pool = self._pool, None
            how = kill_pool(pool)
            raise TrainingFailed(f"the {self.framework} training process of {spec.name} ended ({how}); "
                                 "if the machine ran out of memory, close other programs or train a smaller "
                                 "model") from None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        end_idle_pool(pool)

    def __enter__(self) -> "TrainWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
