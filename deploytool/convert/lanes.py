"""Conversions of one run, ahead of the rows that need them: one warm
`IsolatedConverter` worker per source framework (TensorFlow is imported once
per worker per run), each fed in order by its own thread, so Keras-born and
PyTorch-born conversions do not wait for one another and the first one starts
while the next source is still training. A conversion's failure, crash or
timeout is kept as that conversion's result and raised to the row that asks
for it. This module only schedules; the worker converts, the runner caches.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

from deploytool.artifact import Artifact
from deploytool.convert.isolated import IsolatedConverter
from deploytool.workspace import fresh_dir, made_by_one


# Conversion workers kept between the runs of one process inside `shared_converters()`: framework -> converter.
_SHARED: dict[str, IsolatedConverter] | None = None


@contextmanager
def shared_converters() -> Iterator[None]:
    """The runs inside share their conversion workers, one per source framework, so TensorFlow or PyTorch is
    imported once rather than once per run (the atlas' architectures, a test's cases; as runtime_workers() does for
    the measuring workers). Each run's conversions still go to its own log; a run interrupted mid-conversion kills
    its worker, and the next run starts another."""
    global _SHARED
    if _SHARED is not None:  # nested: the outer block owns them
        yield
        return
    _SHARED = {}
    try:
        yield
    finally:
        kept, _SHARED = _SHARED, None
        for converter in kept.values():
            converter.close()


def made_once(out_dir: Path, make: Callable[[], Artifact]) -> Artifact:
    """The artifact of the cached folder `out_dir`: what another run on this workspace made there, else `make()`
    into it, emptied first. Held under workspace.made_by_one, so a run converting the same folder is waited for
    and what it made is taken, not emptied under its feet (conversions ahead here, and the runner's own)."""
    meta = out_dir / "artifact.json"
    with made_by_one(out_dir):
        if meta.exists():
            return Artifact.load(meta)
        fresh_dir(out_dir)
        return make()


class ConversionLanes:
    """`prefetch(...)` queues a conversion in its framework's lane; `convert(...)` (IsolatedConverter's
    signature) waits for a queued one or runs it in its lane; `wait_for(out_dir)` answers only for queued ones."""

    def __init__(self, log_dir: Path, run_id: str, timeout_s: float | None = None):
        self.log_dir, self.run_id, self.timeout_s = Path(log_dir), run_id, timeout_s
        self._lanes: dict[str, _Lane] = {}
        self._jobs: dict[str, Future] = {}  # out dir -> its conversion
        self._lock = threading.Lock()

    def _lane(self, framework: str) -> "_Lane":
        if framework not in self._lanes:
            name = "convert" if not self._lanes else f"convert-{framework}"
            log = self.log_dir / f"{name}-{self.run_id}.log"
            shared = _SHARED
            converter = shared.get(framework) if shared is not None else None
            if converter is None:
                converter = IsolatedConverter(log, self.timeout_s, framework)
                if shared is not None:
                    shared[framework] = converter
            else:  # a worker an earlier run started: this run's log and limit
                converter.worker.relog(log)
                converter.timeout_s = self.timeout_s
            self._lanes[framework] = _Lane(converter, framework, owned=shared is None)
        return self._lanes[framework]

    def prefetch(self, source: Artifact, fmt: str, quantize: str, out_dir: Path, calibration: Any) -> Future:
        """Queue one conversion into `out_dir` (emptied first); the same `out_dir` is converted once."""
        with self._lock:
            key = str(Path(out_dir))
            if key not in self._jobs:
                self._jobs[key] = self._lane(source.framework).put(source, fmt, quantize, Path(out_dir),
                                                                   calibration)
            return self._jobs[key]

    def wait_for(self, out_dir: Path) -> Artifact | None:
        """The artifact of a queued conversion into `out_dir` once it is done (its StageFailed raised), or None
        when none was queued."""
        with self._lock:
            job = self._jobs.get(str(Path(out_dir)))
        return None if job is None else job.result()

    def drain(self) -> None:
        """Wait until every queued conversion has finished (failed ones included)."""
        for job in list(self._jobs.values()):
            job.exception()

    def convert(self, source: Artifact, fmt: str, quantize: str, out_dir: Path, calibration: Any = None) -> Artifact:
        return self.prefetch(source, fmt, quantize, out_dir, calibration).result()

    def close(self) -> None:
        for lane in self._lanes.values():
            lane.close()
        self._lanes.clear()

    def __enter__(self) -> "ConversionLanes":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Lane:
    """One framework's worker and the thread that hands it conversions one at a time."""

    def __init__(self, converter: IsolatedConverter, framework: str, owned: bool = True):
        self.converter, self.owned = converter, owned  # owned: its worker ends with the lane (not a shared one)
        self._queue: queue.Queue = queue.Queue()
        self.busy = False
        self._thread = threading.Thread(target=self._serve, name=f"convert-lane-{framework}", daemon=True)
        self._thread.start()

    def put(self, source: Artifact, fmt: str, quantize: str, out_dir: Path, calibration: Any) -> Future:
        done: Future = Future()
        self._queue.put((done, (source, fmt, quantize, out_dir, calibration)))
        return done

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            done, (source, fmt, quantize, out_dir, calibration) = item
            if not done.set_running_or_notify_cancel():
                continue
            self.busy = True
            try:
                done.set_result(made_once(out_dir, partial(self.converter.convert, source, fmt, quantize, out_dir,
                                                           calibration)))
            except BaseException as e:  # the row that asks for it raises it
                done.set_exception(e)
            finally:
                self.busy = False

    def close(self) -> None:
        # Conversions not started are dropped; the one running ends with its worker.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        self._queue.put(None)
        if self.busy:  # an interrupted run: nobody will read this conversion's result
            self.converter.kill()  # (a shared one starts again on the next run's first conversion)
        elif self.owned:
            self.converter.close()
        self._thread.join(timeout=5)
