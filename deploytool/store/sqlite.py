"""`SqliteStore`: the default results database, a SQLite file in the workspace,
kept with Python's own sqlite3 instead of SQLAlchemy, whose import alone costs
a third of a second of every command's start. A sibling of `SqlAlchemyStore`
(deploytool.store.sqlalchemy), which stays the way to PostgreSQL and to SQLite
URLs this module does not read (a driver name, connection options): both are
`ResultStore`s writing the tables and rows of deploytool.store.rows, so a file
either one wrote, the other reads. It persists and queries; it never measures
or judges, and errors leave as the same one-line `StoreError`s (worded by
deploytool.store.messages). Nothing here imports SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from typing import Any, Iterable, Iterator
from urllib.parse import parse_qsl, urlencode

from deploytool.errors import StoreError
from deploytool.result import FINAL_STATUSES, Result
from deploytool.store import rows
from deploytool.store.messages import SQLITE_BUSY_TIMEOUT_S, URL_HINT, explain, mask_url, scrub
from deploytool.store.records import Finding, RunRecord, by_prefix

# SQLite's own URI parameters, which SQLAlchemy passes on in the file URI (https://sqlite.org/uri.html)
_URI_PARAMS = {"mode", "cache", "immutable", "nolock", "psow", "vfs"}
_JSON = {t.name: t.json_columns for t in rows.TABLES}


def sqlite_target(url: str) -> tuple[str, bool] | None:
    """(what sqlite3.connect opens, whether it is a URI filename) for a plain SQLite URL — `sqlite:///path`, or
    `sqlite:///file:path?mode=ro&uri=true` as SQLAlchemy reads it — with a relative path made absolute, as
    SqlAlchemyStore does; None for any other URL (PostgreSQL, a driver name, connection options, an in-memory
    database), which SqlAlchemyStore keeps."""
    head, sep, rest = url.partition(":///")
    path, _, query = rest.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    params = dict(pairs)
    if head != "sqlite" or not sep or not path or len(params) != len(pairs) or ":memory:" in path or "%" in path:
        return None  # (SQLAlchemy unquotes %XX in a path: such a URL stays with it)
    if not params:
        return (None if path.startswith("file:") else (os.path.abspath(path), False))
    if params.pop("uri", "").lower() != "true" or not path.startswith("file:") or set(params) - _URI_PARAMS:
        return None
    file = path[len("file:"):]
    file = file if file.startswith("/") else os.path.abspath(file)
    return "file:" + file + (f"?{urlencode(params)}" if params else ""), True


class SqliteStore:
    """A `ResultStore` on a plain SQLite file through the standard library (see the module's docstring)."""

    def __init__(self, url: str):
        target = sqlite_target(url)
        if target is None:
            raise StoreError(f"{mask_url(url)} is not a plain SQLite file URL; {URL_HINT}")
        self._database, self._uri = target
        self.url = "sqlite:///" + self._database + (("&" if "?" in self._database else "?") + "uri=true"
                                                     if self._uri else "")
        self._create_schema()

    # connections ------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """A connection per operation (cheap on a local file; safe across threads); autocommit, so each
        write block below is its own explicit transaction."""
        c = sqlite3.connect(self._database, timeout=SQLITE_BUSY_TIMEOUT_S, uri=self._uri, isolation_level=None)
        c.row_factory = sqlite3.Row
        return c

    @contextlib.contextmanager
    def _read(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._errors(doing):
            c = self._connect()
            try:
                yield c
            finally:
                c.close()

    @contextlib.contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One transaction that takes the write lock at once (a read-modify-write cannot interleave with
        another writer's), committed at the end or rolled back."""
        with self._errors(doing):
            c = self._connect()
            try:
                c.execute("BEGIN IMMEDIATE")
                try:
                    yield c
                except BaseException:
                    if c.in_transaction:  # SQLite itself ends it on some errors (a full disk)
                        c.execute("ROLLBACK")
                    raise
                c.execute("COMMIT")
            finally:
                c.close()

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn any database failure inside the block into a one-line StoreError (a SQLite URL holds no
        password to scrub)."""
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(explain(doing, self.url, scrub(_Quoted(e), []))) from None

    # schema -------------------------------------------------------------
    def _create_schema(self) -> None:
        """Create the missing tables and add the columns a newer schema has (as SqlAlchemyStore does). A
        database that has them all is only read, so a read-only results file opens; racing first runs queue on
        the write lock, and each looks again under it, so none creates what another just made."""
        with self._read("cannot open") as c:
            if not self._schema_changes(c):
                return
        with self._write("cannot open") as c:
            for stmt in self._schema_changes(c):
                c.execute(stmt)

    @staticmethod
    def _schema_changes(c: sqlite3.Connection) -> list[str]:
        """The SQL that makes rows.TABLES here, to the text SQLAlchemy's DDL has on SQLite (a unit test holds
        the two together), for the tables and columns missing."""
        have = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        changes = []
        for table in rows.TABLES:
            if table.name not in have:
                body = [f"{col.name} {col.sql_type}" + (" NOT NULL" if col.not_null else "") for col in table.columns]
                keys = [f"PRIMARY KEY ({', '.join(col.name for col in table.columns if col.primary_key)})"]
                if table.unique:
                    keys.append(f"CONSTRAINT {table.unique[0]} UNIQUE ({', '.join(table.unique[1])})")
                changes.append(f"CREATE TABLE {table.name} (\n\t" + ", \n\t".join([*body, *keys]) + "\n)")
                changes += [f"CREATE INDEX ix_{table.name}_{col.name} ON {table.name} ({col.name})"
                            for col in table.columns if col.index]
        for table in (rows.RESULTS, rows.FINDINGS):  # columns a newer schema added
            if table.name in have:
                present = {r[1] for r in c.execute(f"PRAGMA table_info({table.name})")}
                changes += [f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" {col.sql_type}'
                            for col in table.columns if col.name not in present]
        return changes

    # rows ---------------------------------------------------------------
    def _upsert_sql(self, table: str, row: dict[str, Any], keys: tuple[str, ...], update: Iterable[str]) -> tuple:
        cols = list(row)
        sets = ", ".join(f"{k} = excluded.{k}" for k in update)
        sql = (f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
               f"ON CONFLICT ({', '.join(keys)}) DO " + (f"UPDATE SET {sets}" if sets else "NOTHING"))
        return sql, [self._value(table, k, v) for k, v in row.items()]

    @staticmethod
    def _value(table: str, column: str, v: Any) -> Any:
        return json.dumps(v) if column in _JSON[table] else v

    @staticmethod
    def _row(table: str, r: sqlite3.Row) -> dict[str, Any]:
        """A row as a dict, its JSON columns parsed (as SQLAlchemy's JSON type reads them)."""
        out = dict(r)
        for k in _JSON[table] & out.keys():
            if isinstance(out[k], str):
                out[k] = json.loads(out[k])
        return out

    # runs -------------------------------------------------------------
    def start_run(self, run_id: str, model: str, request: dict[str, Any]) -> None:
        """Record a run as running; starting it again (a resume, or a second host) keeps its first request."""
        row = rows.run_row(run_id, model, request)
        with self._write("cannot record the run in") as c:
            c.execute(*self._upsert_sql("runs", row, ("run_id",), rows.RUN_RESTART_COLUMNS))

    def finish_run(self, run_id: str, status: str = "complete") -> None:
        with self._write("cannot record the end of the run in") as c:
            c.execute("UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?", (status, rows.now(), run_id))

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        with self._read("cannot list the runs in") as c:
            found = c.execute("SELECT * FROM runs ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return [RunRecord.from_row(self._row("runs", r)) for r in found]

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._read("cannot read the run from") as c:
            row = c.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:  # a unique prefix, as git allows ("_" and "%" in it are literal)
                literal = run_id.replace("/", "//").replace("%", "/%").replace("_", "/_")
                found = c.execute("SELECT * FROM runs WHERE run_id LIKE ? || '%' ESCAPE '/' LIMIT 2",
                                  (literal,)).fetchall()
                row = found[0] if len(found) == 1 else None
        return RunRecord.from_row(self._row("runs", row)) if row is not None else None

    # results ----------------------------------------------------------
    def save(self, r: Result) -> None:
        """Insert the result, or replace the stored row of the same run and combination (a re-run's retry)."""
        row = rows.result_row(r)
        keys = ("run_id", "combo_key")
        with self._write("cannot save a result in") as c:
            c.execute(*self._upsert_sql("results", row, keys, [k for k in row if k not in keys]))

    def results_for(self, run_id: str) -> list[Result]:
        with self._read("cannot read the results from") as c:
            found = c.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return [rows.result_of_row(self._row("results", r)) for r in found]

    def final_keys(self, run_id: str) -> set[str]:
        """Combinations of this run already finished for good (not to be measured again)."""
        finals = sorted(FINAL_STATUSES)
        with self._read("cannot read the results from") as c:
            found = c.execute(f"SELECT combo_key FROM results WHERE run_id = ? AND status IN "
                              f"({', '.join('?' for _ in finals)})", (run_id, *finals)).fetchall()
        return {r[0] for r in found}

    def history(self, model: str, combo_keys: Iterable[str], before_run: str) -> dict[str, Result]:
        """The latest measured result of each combination in earlier runs (for regression flags)."""
        keys = list(combo_keys)
        with self._read("cannot read the history from") as c:
            # which row is each combination's latest, from two columns; then only those rows, read whole
            order = c.execute(f"SELECT combo_key, id FROM results WHERE model = ? AND combo_key IN "
                              f"({', '.join('?' for _ in keys)}) AND run_id != ? AND status = 'measured' "
                              "ORDER BY created_at, id", (model, *keys, before_run)).fetchall()
            return rows.latest_results([(k, i) for k, i in order], lambda ids: [
                self._row("results", r) for r in c.execute(
                    f"SELECT * FROM results WHERE id IN ({', '.join('?' for _ in ids)})", ids).fetchall()])

    # study points -------------------------------------------------------
    def save_point(self, run_id: str, study: str, key: str, payload: dict[str, Any]) -> None:
        """Insert one point of a study run, or replace the stored point of the same key (a re-measured point)."""
        row = rows.point_row(run_id, study, key, payload)
        keys = ("run_id", "point_key")
        with self._write("cannot save a study point in") as c:
            c.execute(*self._upsert_sql("study_points", row, keys, [k for k in row if k not in keys]))

    def points(self, run_id: str) -> dict[str, dict[str, Any]]:
        """A study run's points by key, in the order they were first stored."""
        with self._read("cannot read the study points from") as c:
            found = c.execute("SELECT point_key, payload FROM study_points WHERE run_id = ? ORDER BY id",
                              (run_id,)).fetchall()
        return {r["point_key"]: dict(self._row("study_points", r)["payload"] or {}) for r in found}

    # findings -----------------------------------------------------------
    def record_finding(self, key: str, signature: dict[str, Any], owner: str, title: str, run_id: str,
                       versions: dict[str, str], example: str, bundle: str,
                       triage: dict[str, Any] | None = None) -> Finding:
        """Add one sighting of a finding (created on its first); returns the finding as stored."""
        at = rows.now()
        new = rows.new_finding_row(key, signature, owner, title, at)
        with self._write("cannot record a finding in") as c:
            c.execute(*self._upsert_sql("findings", new, ("id",), ()))
            f = Finding.from_json(self._row("findings", c.execute("SELECT * FROM findings WHERE id = ?",
                                                                  (key,)).fetchone()))
            after, update = rows.sighting(f, title, run_id, versions, example, bundle, at, owner, triage)
            c.execute(f"UPDATE findings SET {', '.join(f'{k} = ?' for k in update)} WHERE id = ?",
                      [*(self._value("findings", k, v) for k, v in update.items()), key])
        return after

    def mark_finding_absent(self, key: str, run_id: str, changed: dict[str, str]) -> None:
        """A run that ran the finding's combinations without it: "not seen since" the packages that changed."""
        since = rows.not_seen_since(run_id, changed)
        with self._write("cannot update a finding in") as c:
            c.execute("UPDATE findings SET not_seen_since = ? WHERE id = ? AND not_seen_since IS NULL", (since, key))

    def confirm_finding(self, key: str, confirmation: dict[str, Any]) -> None:
        """Keep what a finding's bare reproducer showed (deploytool.bugs.confirm)."""
        with self._write("cannot update a finding in") as c:
            c.execute("UPDATE findings SET confirmation = ? WHERE id = ?",
                      (self._value("findings", "confirmation", rows.jsonable(confirmation)), key))

    def findings(self) -> list[Finding]:
        with self._read("cannot read the findings from") as c:
            found = c.execute("SELECT * FROM findings ORDER BY last_seen DESC, id").fetchall()
        return [Finding.from_json(self._row("findings", r)) for r in found]

    def get_finding(self, prefix: str) -> Finding | None:
        """A finding by its id or a unique prefix of it."""
        return by_prefix(self.findings(), prefix)


class _Quoted(Exception):
    """A sqlite3 error as SQLAlchemy words it, "(sqlite3.OperationalError) message", so both stores' messages
    (and the fixes matched against them) read the same."""

    def __init__(self, e: sqlite3.Error):
        super().__init__(f"({type(e).__module__}.{type(e).__name__}) {e}")
