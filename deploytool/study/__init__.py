"""Studies: the seed papers' questions asked of deploytool's own machinery.

Each study is one module here (robustness, frameworks, sweep, pitfalls) with the same small surface (`Study` in
base.py), registering itself with `@register_study(NAME)` on its `run`:

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

# Each study module registers itself (`@register_study` on its `run`, base.py) when imported: in this order, the
# order `deploytool study` lists them. They import no framework at module level (cheap to import).
from deploytool.study import pitfalls  # noqa: F401
from deploytool.study import robustness  # noqa: F401
from deploytool.study import sweep  # noqa: F401
from deploytool.study import frameworks  # noqa: F401
from deploytool.errors import UnknownOption
from deploytool.study.base import STUDIES, Study, register_study


def get_study(name: str) -> Study:
    if name not in STUDIES:
        raise UnknownOption(f"unknown study {name!r}; studies: {', '.join(sorted(STUDIES))}")
    return STUDIES[name]


__all__ = ["STUDIES", "Study", "get_study", "register_study"]
