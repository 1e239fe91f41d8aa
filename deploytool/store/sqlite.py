"""`SqliteStore`: the default results database, a SQLite file in the workspace,
kept with Python's own sqlite3 instead of SQLAlchemy, whose import alone costs
a third of a second of every command's start. Same API, same tables, same
file as `Store` (store.py), which stays the way to PostgreSQL and to SQLite
URLs this module does not read (a driver name, connection options): a file
either one wrote, the other reads. It persists and queries; it never measures
or judges, and errors leave as the same one-line `StoreError`s as `Store`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from typing import Any, Iterable, Iterator
from urllib.parse import parse_qsl, urlencode

from deploytool.errors import StoreError
from deploytool.provenance import host_name
from deploytool.result import FINAL_STATUSES, Result
from deploytool.store.sqlalchemy import (
    METRIC_COLUMNS,
    SQLITE_BUSY_TIMEOUT_S,
    URL_HINT,
    Store,
    _finding_row,
    _jsonable,
    _now,
    _result_row,
    _sighting,
    mask_url,
)

# The tables exactly as SQLAlchemy creates them from Store's definitions on SQLite (a unit test holds the two
# together): (column, SQL type, NOT NULL), then the table's constraints and its indexes.
_VC255, _VC64, _VC40 = "VARCHAR(255)", "VARCHAR(64)", "VARCHAR(40)"
TABLES: dict[str, tuple[tuple[tuple[str, str, bool], ...], tuple[str, ...], tuple[str, ...]]] = {
    "runs": ((("run_id", _VC255, True), ("model", "TEXT", False), ("status", _VC64, False), ("host", "TEXT", False),
              ("created_at", _VC40, False), ("updated_at", _VC40, False), ("request", "JSON", False)),
             ("PRIMARY KEY (run_id)",), ()),
    "results": ((("id", "INTEGER", True), ("run_id", _VC255, True), ("combo_key", _VC255, True),
                 ("model", "TEXT", False), ("dataset", "TEXT", False), ("framework", _VC64, False),
                 ("format", _VC64, False), ("quantize", _VC64, False), ("target", _VC64, False),
                 ("device", "TEXT", False), ("backend", _VC64, False), ("runtime", _VC64, False),
                 ("schema_version", "INTEGER", False), ("status", _VC64, False), ("reason", "TEXT", False),
                 ("verdict", _VC64, False), *((m, "FLOAT", False) for m in METRIC_COLUMNS),
                 ("details", "JSON", False), ("outputs_path", "TEXT", False), ("created_at", _VC40, False)),
                ("PRIMARY KEY (id)", "CONSTRAINT uq_run_combo UNIQUE (run_id, combo_key)"),
                ("CREATE INDEX ix_results_run_id ON results (run_id)",)),
    "findings": ((("id", _VC64, True), ("signature", "JSON", False), ("owner", "TEXT", False),
                  ("title", "TEXT", False), ("first_seen", _VC40, False), ("last_seen", _VC40, False),
                  ("occurrences", "INTEGER", False), ("runs", "JSON", False), ("versions", "JSON", False),
                  ("last_versions", "JSON", False), ("examples", "JSON", False), ("bundle", "TEXT", False),
                  ("not_seen_since", "TEXT", False)),
                 ("PRIMARY KEY (id)",), ()),
    "study_points": ((("id", "INTEGER", True), ("run_id", _VC255, True), ("study", _VC64, False),
                      ("point_key", _VC255, True), ("payload", "JSON", False), ("created_at", _VC40, False)),
                     ("PRIMARY KEY (id)", "CONSTRAINT uq_run_point UNIQUE (run_id, point_key)"),
                     ("CREATE INDEX ix_study_points_run_id ON study_points (run_id)",)),
}
# SQLite's own URI parameters, which SQLAlchemy passes on in the file URI (https://sqlite.org/uri.html)
_URI_PARAMS = {"mode", "cache", "immutable", "nolock", "psow", "vfs"}
_JSON = {t: {c for c, kind, _ in cols if kind == "JSON"} for t, (cols, _, _) in TABLES.items()}


def sqlite_target(url: str) -> tuple[str, bool] | None:
    """(what sqlite3.connect opens, whether it is a URI filename) for a plain SQLite URL — `sqlite:///path`, or
    `sqlite:///file:path?mode=ro&uri=true` as SQLAlchemy reads it — with a relative path made absolute, as
    Store does; None for any other URL (PostgreSQL, a driver name, connection options, an in-memory database),
    which Store keeps."""
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


class SqliteStore(Store):
    """`Store`'s API on a SQLite file through the standard library (see the module's docstring)."""

    def __init__(self, url: str):
        target = sqlite_target(url)
        if target is None:
            raise StoreError(f"{mask_url(url)} is not a plain SQLite file URL; {URL_HINT}")
        self._database, self._uri = target
        self._secrets = []  # a SQLite URL holds no password
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
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(self._explain(doing, _Quoted(e))) from None

    # schema -------------------------------------------------------------
    def _create_schema(self) -> None:
        """Create the missing tables and add the columns a newer schema has (as Store does). A database that
        has them all is only read, so a read-only results file opens; racing first runs queue on the write
        lock, and each looks again under it, so none creates what another just made."""
        with self._read("cannot open") as c:
            if not self._schema_changes(c):
                return
        with self._write("cannot open") as c:
            for stmt in self._schema_changes(c):
                c.execute(stmt)

    @staticmethod
    def _schema_changes(c: sqlite3.Connection) -> list[str]:
        have = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        changes = []
        for table, (cols, constraints, indexes) in TABLES.items():
            if table not in have:
                body = [f"{name} {kind}" + (" NOT NULL" if not_null else "") for name, kind, not_null in cols]
                changes.append(f"CREATE TABLE {table} (\n\t" + ", \n\t".join([*body, *constraints]) + "\n)")
                changes.extend(indexes)
        if "results" in have:
            present = {r[1] for r in c.execute("PRAGMA table_info(results)")}
            changes += [f'ALTER TABLE results ADD COLUMN "{name}" {kind}' for name, kind, _ in TABLES["results"][0]
                        if name not in present]
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
        row = {"run_id": run_id, "model": model, "host": host_name(), "status": "running",
               "created_at": _now(), "updated_at": _now(), "request": _jsonable(request)}
        with self._write("cannot record the run in") as c:
            c.execute(*self._upsert_sql("runs", row, ("run_id",), ("status", "updated_at")))

    def finish_run(self, run_id: str, status: str = "complete") -> None:
        with self._write("cannot record the end of the run in") as c:
            c.execute("UPDATE runs SET status = ?, updated_at = ? WHERE run_id = ?", (status, _now(), run_id))

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]:
        with self._read("cannot list the runs in") as c:
            rows = c.execute("SELECT * FROM runs ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return [self._row("runs", r) for r in rows]

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self._read("cannot read the run from") as c:
            row = c.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:  # a unique prefix, as git allows ("_" and "%" in it are literal)
                literal = run_id.replace("/", "//").replace("%", "/%").replace("_", "/_")
                rows = c.execute("SELECT * FROM runs WHERE run_id LIKE ? || '%' ESCAPE '/' LIMIT 2",
                                 (literal,)).fetchall()
                row = rows[0] if len(rows) == 1 else None
        return self._row("runs", row) if row is not None else None

    # results ----------------------------------------------------------
    def save(self, r: Result) -> None:
        row = _result_row(r)
        keys = ("run_id", "combo_key")
        with self._write("cannot save a result in") as c:
            c.execute(*self._upsert_sql("results", row, keys, [k for k in row if k not in keys]))

    def results_for(self, run_id: str) -> list[Result]:
        with self._read("cannot read the results from") as c:
            rows = c.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return [self._to_result(self._row("results", r)) for r in rows]

    def final_keys(self, run_id: str) -> set[str]:
        finals = sorted(FINAL_STATUSES)
        with self._read("cannot read the results from") as c:
            rows = c.execute(f"SELECT combo_key FROM results WHERE run_id = ? AND status IN "
                             f"({', '.join('?' for _ in finals)})", (run_id, *finals)).fetchall()
        return {r[0] for r in rows}

    def history(self, model: str, combo_keys: Iterable[str], before_run: str) -> dict[str, Result]:
        keys = list(combo_keys)
        out: dict[str, Result] = {}
        with self._read("cannot read the history from") as c:
            rows = c.execute(f"SELECT * FROM results WHERE model = ? AND combo_key IN ({', '.join('?' for _ in keys)}) "
                             "AND run_id != ? AND status = 'measured' ORDER BY created_at, id",
                             (model, *keys, before_run)).fetchall()
        for r in rows:
            out[r["combo_key"]] = self._to_result(self._row("results", r))
        return out

    # study points -------------------------------------------------------
    def save_point(self, run_id: str, study: str, key: str, payload: dict[str, Any]) -> None:
        row = {"run_id": run_id, "study": study, "point_key": key, "payload": _jsonable(payload), "created_at": _now()}
        keys = ("run_id", "point_key")
        with self._write("cannot save a study point in") as c:
            c.execute(*self._upsert_sql("study_points", row, keys, [k for k in row if k not in keys]))

    def points(self, run_id: str) -> dict[str, dict[str, Any]]:
        with self._read("cannot read the study points from") as c:
            rows = c.execute("SELECT point_key, payload FROM study_points WHERE run_id = ? ORDER BY id",
                             (run_id,)).fetchall()
        return {r["point_key"]: dict(self._row("study_points", r)["payload"] or {}) for r in rows}

    # findings -----------------------------------------------------------
    def record_finding(self, key: str, signature: dict[str, Any], owner: str, title: str, run_id: str,
                       versions: dict[str, str], example: str, bundle: str) -> dict[str, Any]:
        now = _now()
        new = {"id": key, "signature": _jsonable(signature), "owner": owner, "title": title, "first_seen": now,
               "last_seen": now, "occurrences": 0, "runs": [], "versions": {}, "last_versions": {}, "examples": [],
               "bundle": ""}
        with self._write("cannot record a finding in") as c:
            c.execute(*self._upsert_sql("findings", new, ("id",), ()))
            f = _finding_row(self._row("findings", c.execute("SELECT * FROM findings WHERE id = ?", (key,)).fetchone()))
            update = _sighting(f, title, run_id, versions, example, bundle, now)
            c.execute(f"UPDATE findings SET {', '.join(f'{k} = ?' for k in update)} WHERE id = ?",
                      [*(self._value("findings", k, v) for k, v in update.items()), key])
        return {**f, **update}

    def mark_finding_absent(self, key: str, run_id: str, changed: dict[str, str]) -> None:
        since = ", ".join(f"{p} {v}" for p, v in sorted(changed.items())) or f"run {run_id}"
        with self._write("cannot update a finding in") as c:
            c.execute("UPDATE findings SET not_seen_since = ? WHERE id = ? AND not_seen_since IS NULL", (since, key))

    def findings(self) -> list[dict[str, Any]]:
        with self._read("cannot read the findings from") as c:
            rows = c.execute("SELECT * FROM findings ORDER BY last_seen DESC, id").fetchall()
        return [_finding_row(self._row("findings", r)) for r in rows]


class _Quoted(Exception):
    """A sqlite3 error as SQLAlchemy words it, "(sqlite3.OperationalError) message", so both stores' messages
    (and the fixes matched against them) read the same."""

    def __init__(self, e: sqlite3.Error):
        super().__init__(f"({type(e).__module__}.{type(e).__name__}) {e}")
