"""`StudyRun`: a study as a run in the store. Its identity is the study's name plus the request (which a study
fills with the content hashes of its inputs: model, data, manifest), so running the same study again resumes it
and skips every point already stored; `--fresh` starts a new run. Points are JSON payloads keyed within the run.

`Study` is what every study module offers, and `STUDIES` the registry of them: a study module registers itself
by putting `@register_study(NAME)` on its `run`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from deploytool.registry import Registry
from deploytool.store import ResultStore, RunRecord, open_store
from deploytool.value import value
from deploytool.workspace import Workspace, check_name, safe_segment, stable_hash

if TYPE_CHECKING:
    from deploytool.study.report import Section


@value(frozen=False)
class StudyRun:
    study: str
    run_id: str
    model: str
    request: dict[str, Any]
    ws: Workspace
    store: ResultStore

    @classmethod
    def open(cls, study: str, model: str, request: dict[str, Any], workspace: str | Path | None = None,
             db: str | None = None, run_id: str | None = None, fresh: bool = False) -> "StudyRun":
        """Start (or resume) the study run for `request`. `request` must be JSON-able and name every input by
        content (e.g. the manifest's and the test set's sha256), so changed inputs never resume an old run."""
        ws = Workspace.open(workspace)
        store = open_store(db, ws.default_db_url)
        if run_id is None:
            run_id = f"{study}-{safe_segment(model, 40)}-{stable_hash({'study': study, **request}, 10)}"
            if fresh:
                run_id += "-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        check_name(run_id, "run id", 128)
        store.start_run(run_id, model, {"study": study, **request})
        return cls(study, run_id, model, request, ws, store)

    @classmethod
    def stored(cls, run: RunRecord, ws: Workspace, store: ResultStore) -> "StudyRun":
        """The study run of a stored run (for `deploytool report`)."""
        request = dict(run.request)
        study = request.pop("study")
        return cls(study, run.run_id, run.model, request, ws, store)

    def points(self) -> dict[str, dict[str, Any]]:
        return self.store.points(self.run_id)

    def save(self, key: str, payload: dict[str, Any]) -> None:
        self.store.save_point(self.run_id, self.study, key, payload)

    def finish(self, status: str = "complete") -> None:
        self.store.finish_run(self.run_id, status)

    @property
    def report_dir(self) -> Path:
        return self.ws.report_dir(self.run_id)


class Study(Protocol):
    """A study module's surface (deploytool/study/__init__.py says what each part does)."""

    HELP: str  # one line: `deploytool study NAME --help` and the list of studies
    EXAMPLES: tuple[str, ...]

    def add_cli(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...

    def report(self, srun: StudyRun) -> list[Section]: ...


# study name -> its module, in the order `deploytool study` lists them (the order deploytool.study imports them)
STUDIES: Registry[Study] = Registry("study")


def register_study(name: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """The decorator a study module puts on its `run(args) -> int`: registers the module as the study `name`."""

    def decorate(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        STUDIES.add(name, sys.modules[run.__module__])
        return run

    return decorate
