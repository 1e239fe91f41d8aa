"""`SqlAlchemyStore`: the results database behind SQLAlchemy — a PostgreSQL URL
(`--db` / DEPLOYTOOL_DB) for a lab of several hosts, or a SQLite URL the
standard library's store (deploytool.store.sqlite) does not read. Each result
is committed as soon as its combination finishes, so an interrupted run loses
nothing measured and a re-run can resume. The store persists and queries; it
never measures or judges. Its tables and rows are deploytool.store.rows', the
same as the SQLite store's.

Several processes may use one database at once (two first runs racing to
create the tables, lab hosts saving the same run): schema creation tolerates
the race and every write is one atomic upsert, so the last write of a row wins.
Every database failure leaves as a one-line `StoreError` naming the database
(password masked) and the fix; no database error may reach the user as a
traceback, and no password may reach the user at all.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterable, Iterator

from deploytool.errors import StoreError
from deploytool.result import FINAL_STATUSES, Result
from deploytool.store import rows
from deploytool.store.messages import SQLITE_BUSY_TIMEOUT_S, URL_HINT, explain, mask_url, scrub, typed_secrets
from deploytool.store.records import Finding, RunRecord, by_prefix

_SCHEMA_ATTEMPTS = 5


def _secrets(url: str) -> list[str]:
    """The passwords in `url` (as typed, their pieces around an unescaped "@", and as SQLAlchemy parses them),
    to scrub from driver messages, which may quote a misparsed host such as "rest-of-password@host"."""
    typed = typed_secrets(url)
    try:
        from sqlalchemy.engine import make_url

        typed.append(make_url(url).password or "")
    except Exception:
        pass
    found = {piece for s in typed for piece in [s, *s.split("@")]}
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)  # shorter ones would mangle the text


def _absolute_sqlite(url: Any) -> Any:
    """A SQLite URL whose file is named relative to the working directory, made absolute once at open, so
    that the store keeps using the same file whatever the process's working directory becomes later."""
    db = url.database
    if url.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file::memory:"):
        return url
    if db.startswith("file:") and url.query.get("uri"):  # a SQLite URI filename: file:relative/path, file:/abs
        path = db[len("file:"):]
        return url if path.startswith("/") else url.set(database="file:" + os.path.abspath(path))
    return url if os.path.isabs(db) else url.set(database=os.path.abspath(db))


def _sa_table(sa: Any, md: Any, table: rows.Table) -> Any:
    """SQLAlchemy's Table of one of rows.TABLES."""
    types = {"INTEGER": sa.Integer, "TEXT": sa.Text, "FLOAT": sa.Float, "JSON": sa.JSON}
    cols = []
    for c in table.columns:
        kind = sa.String(c.length) if c.kind == "VARCHAR" else types[c.kind]
        opts: dict[str, Any] = ({"primary_key": True, "autoincrement": True} if c.primary_key and c.kind == "INTEGER"
                                else {"primary_key": True} if c.primary_key else {"nullable": c.nullable})
        if c.index:
            opts["index"] = True
        cols.append(sa.Column(c.name, kind, **opts))
    unique = [sa.UniqueConstraint(*table.unique[1], name=table.unique[0])] if table.unique else []
    return sa.Table(table.name, md, *cols, *unique)


class SqlAlchemyStore:
    """A `ResultStore` on any SQLite or PostgreSQL URL, through SQLAlchemy (see the module's docstring)."""

    def __init__(self, url: str):
        try:
            import sqlalchemy as sa
        except ImportError as e:  # pragma: no cover - setup installs it
            raise StoreError("SQLAlchemy is missing: run `make setup`") from e
        self.sa = sa
        self._secrets = _secrets(url)
        self.url = mask_url(url)  # what messages show; the engine holds the real one
        try:
            parsed = _absolute_sqlite(sa.engine.make_url(url))
            dialect = parsed.get_backend_name()
            if dialect not in ("sqlite", "postgresql"):
                raise StoreError(f"the results database {self.url} is {dialect}; deploytool keeps results in "
                                 f"SQLite or PostgreSQL: {URL_HINT}")
            if dialect == "sqlite":
                # Writers on one file queue for up to this long instead of failing at once ("database is
                # locked"). Journal mode stays the default: WAL would need write access to the folder even to
                # read a results.db there, and does not work on network filesystems.
                opts: dict[str, Any] = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
            else:
                # pre-ping: a lab run outlives server restarts; a dropped pooled connection is replaced, not fatal.
                opts = {"connect_args": {"connect_timeout": 10}, "pool_pre_ping": True}
            self.engine = sa.create_engine(parsed, **opts)
            self.url = mask_url(parsed.render_as_string(hide_password=True))
        except StoreError:
            raise
        except Exception as e:
            raise StoreError(f"the database URL {self.url!r} (--db / DEPLOYTOOL_DB) is not usable "
                             f"({scrub(e, self._secrets)}); {URL_HINT}") from None
        self.metadata = md = sa.MetaData()
        self.runs, self.results, self.findings_table, self.study_points = (_sa_table(sa, md, t) for t in rows.TABLES)
        self._create_schema()

    def _create_schema(self) -> None:
        """Create the tables if missing and widen columns an older version made narrower. Two first runs may
        race here: the loser sees "already exists" / a duplicate catalog key and looks again (create_all skips
        tables that exist)."""
        for attempt in range(_SCHEMA_ATTEMPTS):
            try:
                self.metadata.create_all(self.engine)
                self._add_new_columns()
                self._widen_old_columns()
                return
            except self.sa.exc.SQLAlchemyError as e:
                text = str(e).lower()
                raced = "already exists" in text or "duplicate key value" in text or "duplicate column" in text
                if not raced or attempt == _SCHEMA_ATTEMPTS - 1:
                    raise StoreError(self._explain("cannot open", e)) from None
                time.sleep(0.1 * (attempt + 1))

    def _add_new_columns(self) -> None:
        """Columns a newer schema added to a table an older version created (the upgrade path: the old rows
        keep NULL there and are read through `Result.from_json`'s upgrade)."""
        sa = self.sa
        inspector = sa.inspect(self.engine)
        for table in (self.results, self.findings_table):
            have = {c["name"] for c in inspector.get_columns(table.name)}
            missing = [col for col in table.columns if col.name not in have]
            if missing:
                with self.engine.begin() as c:
                    for col in missing:
                        c.execute(sa.text(f'ALTER TABLE {table.name} ADD COLUMN "{col.name}" '
                                          f"{col.type.compile(dialect=self.engine.dialect)}"))

    def _widen_old_columns(self) -> None:
        # PostgreSQL enforces VARCHAR lengths and databases made by older versions have narrower ones (run_id was
        # 64); SQLite ignores lengths. Widening a VARCHAR is a catalog change, done once per database.
        if self.engine.dialect.name != "postgresql":
            return
        sa = self.sa
        inspector = sa.inspect(self.engine)
        changes = []
        for table in (self.runs, self.results):
            have = {c["name"]: c["type"] for c in inspector.get_columns(table.name)}
            for col in table.columns:
                old_len = getattr(have.get(col.name), "length", None)
                if not isinstance(col.type, sa.String) or not old_len:
                    continue  # not text, or already unbounded
                if col.type.length is None or col.type.length > old_len:  # TEXT now, or a longer VARCHAR
                    changes.append(f'ALTER TABLE {table.name} ALTER COLUMN "{col.name}" TYPE '
                                   f"{col.type.compile(dialect=self.engine.dialect)}")
        if changes:
            with self.engine.begin() as c:
                for stmt in changes:
                    c.execute(sa.text(stmt))

    # errors -----------------------------------------------------------
    def _explain(self, doing: str, e: BaseException) -> str:
        return explain(doing, self.url, scrub(e, self._secrets))

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn any database failure inside the block into a one-line StoreError."""
        try:
            yield
        except self.sa.exc.SQLAlchemyError as e:
            raise StoreError(self._explain(doing, e)) from None

    def _insert(self, table: Any) -> Any:
        """The dialect's INSERT, which has ON CONFLICT."""
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as postgresql_insert

            return postgresql_insert(table)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)

    def _upsert(self, table: Any, row: dict[str, Any], keys: tuple[str, ...], update: Iterable[str]) -> Any:
        """INSERT ... ON CONFLICT (keys) DO UPDATE: one atomic statement, so concurrent writers of the same row
        never collide and the last one wins (a delete-then-insert raced into duplicate-key errors)."""
        stmt = self._insert(table).values(**row)
        return stmt.on_conflict_do_update(index_elements=list(keys), set_={k: stmt.excluded[k] for k in update})

    # runs -------------------------------------------------------------
    def start_run(self, run_id: str, model: str, request: dict[str, Any]) -> None:
        """Record a run as running; starting it again (a resume, or a second host) keeps its first request."""
        row = rows.run_row(run_id, model, request)
        with self._errors("cannot record the run in"), self.engine.begin() as c:
            c.execute(self._upsert(self.runs, row, ("run_id",), rows.RUN_RESTART_COLUMNS))

    def finish_run(self, run_id: str, status: str = "complete") -> None:
        with self._errors("cannot record the end of the run in"), self.engine.begin() as c:
            c.execute(self.runs.update().where(self.runs.c.run_id == run_id)
                      .values(status=status, updated_at=rows.now()))

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        sa = self.sa
        with self._errors("cannot list the runs in"), self.engine.connect() as c:
            found = c.execute(sa.select(self.runs).order_by(self.runs.c.created_at.desc()).limit(limit)).mappings()
            return [RunRecord.from_row(dict(r)) for r in found]

    def get_run(self, run_id: str) -> RunRecord | None:
        sa = self.sa
        with self._errors("cannot read the run from"), self.engine.connect() as c:
            row = c.execute(sa.select(self.runs).where(self.runs.c.run_id == run_id)).mappings().first()
            if row is None:  # allow a unique prefix, as git does ("_" and "%" in it are literal)
                found = c.execute(sa.select(self.runs).where(self.runs.c.run_id.startswith(run_id, autoescape=True))
                                  .limit(2)).mappings().all()
                row = found[0] if len(found) == 1 else None
            return RunRecord.from_row(dict(row)) if row else None

    # results ----------------------------------------------------------
    def save(self, r: Result) -> None:
        """Insert the result, or replace the stored row of the same run and combination (a re-run's retry)."""
        row = rows.result_row(r)
        keys = ("run_id", "combo_key")
        with self._errors("cannot save a result in"), self.engine.begin() as c:
            c.execute(self._upsert(self.results, row, keys, [k for k in row if k not in keys]))

    def results_for(self, run_id: str) -> list[Result]:
        sa = self.sa
        with self._errors("cannot read the results from"), self.engine.connect() as c:
            found = c.execute(sa.select(self.results).where(self.results.c.run_id == run_id)
                              .order_by(self.results.c.id)).mappings().all()
        return [rows.result_of_row(dict(r)) for r in found]

    def final_keys(self, run_id: str) -> set[str]:
        """Combinations of this run already finished for good (not to be measured again)."""
        sa = self.sa
        with self._errors("cannot read the results from"), self.engine.connect() as c:
            found = c.execute(sa.select(self.results.c.combo_key).where(sa.and_(
                self.results.c.run_id == run_id, self.results.c.status.in_(FINAL_STATUSES))))
            return {r[0] for r in found}

    def history(self, model: str, combo_keys: Iterable[str], before_run: str) -> dict[str, Result]:
        """The latest measured result of each combination in earlier runs (for regression flags)."""
        sa = self.sa
        keys = list(combo_keys)
        t = self.results
        with self._errors("cannot read the history from"), self.engine.connect() as c:
            # Latest by the time it was measured: an upsert keeps a row's id, so the id alone is first-insert order.
            # Which row that is comes from two columns; only those rows are read whole (rows.latest_results).
            order = c.execute(sa.select(t.c.combo_key, t.c.id).where(sa.and_(
                t.c.model == model, t.c.combo_key.in_(keys), t.c.run_id != before_run, t.c.status == "measured"))
                .order_by(t.c.created_at, t.c.id)).all()
            return rows.latest_results([(k, i) for k, i in order], lambda ids: [
                dict(r) for r in c.execute(sa.select(t).where(t.c.id.in_(ids))).mappings().all()])

    # study points -------------------------------------------------------
    def save_point(self, run_id: str, study: str, key: str, payload: dict[str, Any]) -> None:
        """Insert one point of a study run, or replace the stored point of the same key (a re-measured point)."""
        row = rows.point_row(run_id, study, key, payload)
        keys = ("run_id", "point_key")
        with self._errors("cannot save a study point in"), self.engine.begin() as c:
            c.execute(self._upsert(self.study_points, row, keys, [k for k in row if k not in keys]))

    def points(self, run_id: str) -> dict[str, dict[str, Any]]:
        """A study run's points by key, in the order they were first stored."""
        t = self.study_points
        with self._errors("cannot read the study points from"), self.engine.connect() as c:
            found = c.execute(self.sa.select(t.c.point_key, t.c.payload).where(t.c.run_id == run_id)
                              .order_by(t.c.id)).all()
        return {k: dict(v or {}) for k, v in found}

    # findings -----------------------------------------------------------
    def record_finding(self, key: str, signature: dict[str, Any], owner: str, title: str, run_id: str,
                       versions: dict[str, str], example: str, bundle: str,
                       triage: dict[str, Any] | None = None) -> Finding:
        """Add one sighting of a finding (created on its first); returns the finding as stored."""
        sa, t = self.sa, self.findings_table
        at = rows.now()
        with self._errors("cannot record a finding in"), self.engine.begin() as c:
            new = rows.new_finding_row(key, signature, owner, title, at)
            c.execute(self._insert(t).values(**new).on_conflict_do_nothing(index_elements=["id"]))
            q = sa.select(t).where(t.c.id == key)
            if self.engine.dialect.name == "postgresql":
                q = q.with_for_update()
            f = Finding.from_json(dict(c.execute(q).mappings().one()))
            after, update = rows.sighting(f, title, run_id, versions, example, bundle, at, owner, triage)
            c.execute(t.update().where(t.c.id == key).values(**update))
            return after

    def mark_finding_absent(self, key: str, run_id: str, changed: dict[str, str]) -> None:
        """A run that ran the finding's combinations without it: "not seen since" the packages that changed."""
        t = self.findings_table
        since = rows.not_seen_since(run_id, changed)
        with self._errors("cannot update a finding in"), self.engine.begin() as c:
            c.execute(t.update().where(t.c.id == key).where(t.c.not_seen_since.is_(None)).values(not_seen_since=since))

    def confirm_finding(self, key: str, confirmation: dict[str, Any]) -> None:
        """Keep what a finding's bare reproducer showed (deploytool.bugs.confirm)."""
        t = self.findings_table
        with self._errors("cannot update a finding in"), self.engine.begin() as c:
            c.execute(t.update().where(t.c.id == key).values(confirmation=rows.jsonable(confirmation)))

    def findings(self) -> list[Finding]:
        t = self.findings_table
        with self._errors("cannot read the findings from"), self.engine.connect() as c:
            found = c.execute(self.sa.select(t).order_by(t.c.last_seen.desc(), t.c.id)).mappings().all()
        return [Finding.from_json(dict(r)) for r in found]

    def get_finding(self, prefix: str) -> Finding | None:
        """A finding by its id or a unique prefix of it."""
        return by_prefix(self.findings(), prefix)
