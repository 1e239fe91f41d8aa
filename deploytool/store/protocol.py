"""`ResultStore`: what every results database answers, whichever store keeps it (deploytool.store.sqlite's
`SqliteStore` for a plain SQLite file, deploytool.store.sqlalchemy's `SqlAlchemyStore` for PostgreSQL and other
SQLite URLs). Code above the store takes a `ResultStore` and never asks which one it has."""

from __future__ import annotations

from typing import Any, Iterable, Protocol

from deploytool.result import Result
from deploytool.store.records import Finding, RunRecord


class ResultStore(Protocol):
    """Persists and queries runs, results, study points and findings; it never measures or judges. Every
    database failure leaves as a one-line StoreError naming the database (`url`, password masked) and the fix."""

    url: str  # the database, as messages show it (no password)

    # runs
    def start_run(self, run_id: str, model: str, request: dict[str, Any]) -> None:
        """Record a run as running; starting it again (a resume, or a second host) keeps its first request."""
        ...

    def finish_run(self, run_id: str, status: str = "complete") -> None: ...

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The latest runs first."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run of this id, or of the one id it is a prefix of ("_" and "%" in it are literal)."""
        ...

    # results
    def save(self, r: Result) -> None:
        """Insert the result, or replace the stored row of the same run and combination (a re-run's retry)."""
        ...

    def results_for(self, run_id: str) -> list[Result]: ...

    def final_keys(self, run_id: str) -> set[str]:
        """Combinations of this run already finished for good (not to be measured again)."""
        ...

    def history(self, model: str, combo_keys: Iterable[str], before_run: str) -> dict[str, Result]:
        """The latest measured result of each combination in earlier runs (for regression flags)."""
        ...

    # study points
    def save_point(self, run_id: str, study: str, key: str, payload: dict[str, Any]) -> None: ...

    def points(self, run_id: str) -> dict[str, dict[str, Any]]:
        """A study run's points by key, in the order they were first stored."""
        ...

    # findings
    def confirm_finding(self, key: str, confirmation: dict[str, Any]) -> None:
        """Keep what a finding's bare reproducer showed (deploytool.bugs.confirm)."""
        ...

    def record_finding(self, key: str, signature: dict[str, Any], owner: str, title: str, run_id: str,
                       versions: dict[str, str], example: str, bundle: str,
                       triage: dict[str, Any] | None = None) -> Finding:
        """Add one sighting of a finding (created on its first); returns the finding as stored. The sighting's
        owner and triage replace the stored ones."""
        ...

    def mark_finding_absent(self, key: str, run_id: str, changed: dict[str, str]) -> None:
        """A run that ran the finding's combinations without it: "not seen since" the packages that changed."""
        ...

    def findings(self) -> list[Finding]:
        """Every finding, the latest seen first."""
        ...

    def get_finding(self, prefix: str) -> Finding | None:
        """A finding by its id or a unique prefix of it."""
        ...
