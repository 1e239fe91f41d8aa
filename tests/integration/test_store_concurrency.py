"""Several real processes on one SQLite results file at once: the first runs
of a new workspace racing to create the tables, then overlapping saves and
starts of the same run. Nothing may raise, lose or double a row, and each row
is the last write of some writer. The PostgreSQL twin is in
test_store_postgres.py."""

from __future__ import annotations

import pytest

from deploytool.store import SqlAlchemyStore
from tests.store_hammer import check_last_write_wins, hammer

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files

WRITERS, KEYS, SAVES = 4, 10, 60


def test_concurrent_first_runs_and_saves_on_one_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"  # a fresh file: every writer creates the schema at once
    lasts = hammer(url, WRITERS, KEYS, SAVES)
    check_last_write_wins(SqlAlchemyStore(url), lasts, KEYS)
