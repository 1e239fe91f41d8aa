"""Studies: the seed papers' questions asked of deploytool's own machinery.

Each study is one module here (robustness, frameworks, sweep, pitfalls) with the same small surface:

- `add_cli(parser)`: its flags on `deploytool study NAME` (the common --workspace/--db/--run-id/--fresh are added
  by the CLI);
- `run(args) -> int`: measure, store and report; returns the exit code;
- `report(study_run) -> list[Section]`: the sections of its HTML/JSON/Markdown report, built from stored points
  only, so `deploytool report RUN` renders a study like a migration.

A study run is a run in the store (its request carries "study": NAME) whose measurements are points (`StudyRun`
in base.py): keyed, resumable, with provenance. Studies reuse migrate's caches: trained models, conversions and
runtimes come from the same code paths, so nothing already trained or converted is redone.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from deploytool.errors import UnknownOption

# name -> module; each study adds its own line
STUDIES: dict[str, str] = {
    "pitfalls": "deploytool.study.pitfalls",
    "robustness": "deploytool.study.robustness",
    "sweep": "deploytool.study.sweep",
    "frameworks": "deploytool.study.frameworks",
}


def get_study(name: str) -> ModuleType:
    if name not in STUDIES:
        raise UnknownOption(f"unknown study {name!r}; studies: {', '.join(sorted(STUDIES))}")
    return importlib.import_module(STUDIES[name])
