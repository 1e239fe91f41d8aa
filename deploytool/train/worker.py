"""The spawned process a model trains in (a `proc.worker.Worker`). It is fresh, so TensorFlow's thread pools get
the requested size before TensorFlow starts (PyTorch gets the same count), and its peak memory is the
training's, not the caller's. One worker serves one framework at one thread count and may train several models
in a row (a study's seeds); it ends with its caller. It only says what runs in the worker: deploytool.train
trains, and the process itself is proc.worker's business.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from deploytool.errors import TrainingFailed
from deploytool.proc.threads import pin
from deploytool.proc.quiet import WORKER_ENV
from deploytool.proc.worker import Worker, WorkerLost
from deploytool.train.fit import fit_measured

# Set in the worker before TensorFlow starts: the user's terminal shows the progress bars, not TF's logs.

_THREADS: dict[str, Any] = {}  # in the worker: what pinning the threads gave


def _init(framework: str, threads: int) -> None:
    warnings.filterwarnings("ignore")
    _THREADS.update(pin(framework, threads))


def _fit(spec: Any, framework: str, dataset: Any, epochs: int, path: str, progress: bool) -> dict[str, Any]:
    return fit_measured(spec, framework, dataset, epochs, Path(path), progress, dict(_THREADS))


class TrainWorker:
    """`fit(...)` in a spawned process pinned to `threads` for `framework`; a context manager."""

    def __init__(self, framework: str, threads: int = 1):
        self.framework, self.threads = framework, threads
        self.worker = Worker(_init, (framework, threads), env=WORKER_ENV)

    def fit(self, spec: Any, dataset: Any, epochs: int, path: Path, progress: bool) -> dict[str, Any]:
        try:
            return self.worker.call(_fit, spec, self.framework, dataset, epochs, str(path), progress)
        except WorkerLost as e:
            raise TrainingFailed(f"the {self.framework} training process of {spec.name} ended ({e.how}); "
                                 "if the machine ran out of memory, close other programs or train a smaller "
                                 "model") from None

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> "TrainWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
