"""`Store`: the results database behind SQLAlchemy — a SQLite file in the
workspace by default, a PostgreSQL URL (`--db` / DEPLOYTOOL_DB) for a lab of
several hosts. Each result is committed as soon as its combination finishes,
so an interrupted run loses nothing measured and a re-run can resume. The
store persists and queries; it never measures or judges.

Several processes may use one database at once (two first runs racing to
create the tables, lab hosts saving the same run): schema creation tolerates
the race and every write is one atomic upsert, so the last write of a row wins.
Every database failure leaves as a one-line `StoreError` naming the database
(password masked) and the fix; no database error may reach the user as a
traceback, and no password may reach the user at all.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import time
from typing import Any, Iterable, Iterator

from deploytool.errors import StoreError
from deploytool.provenance import host_name
from deploytool.result import FINAL_STATUSES, SCHEMA_VERSION, Result

# Numbers kept as real columns so a lab can query them in SQL; the rest is JSON.
METRIC_COLUMNS = ("accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "flipped_count",
                  "max_abs_error", "mean_abs_error", "p50_ms", "p90_ms", "p99_ms", "mean_ms",
                  "latency_ratio_p50", "latency_ratio_p90", "memory_bytes", "memory_ratio", "size_bytes",
                  "size_ratio", "load_ms", "first_inference_ms")

# what the store keeps in columns of its own rather than in the details document
_COLUMNS = ("schema", "run_id", "combo_key", "model", "dataset", "combo", "status", "reason", "outputs_path",
            "created_at")
URL_HINT = "use sqlite:///path/results.db or postgresql+psycopg://user:pass@host/db"
SQLITE_BUSY_TIMEOUT_S = 30  # how long a writer waits for another process's write on the same SQLite file
_SCHEMA_ATTEMPTS = 5

# `user:secret@` in anything that looks like a URL, and libpq secrets passed as query parameters. Greedy up to
# the last "@": a password with an unescaped "@" in it is still masked whole, even where SQLAlchemy misparses it.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^:/@?#\s]*):(?P<pw>.*)@")
_BARE_USERINFO = re.compile(r"^(?P<head>[^:/@?#\s]*):(?P<pw>.*)@")  # "user:pass@host/db", the scheme forgotten
_QUERY_SECRET = re.compile(r"(?i)(?P<head>[?&](?:password|sslpassword)=)[^&#\s]*")

# What a database failure means for the user, by the driver's message: (pattern, fix), first match wins.
_FIXES = tuple((re.compile(p, re.IGNORECASE), fix) for p, fix in (
    (r"readonly database|read-only|read only",
     "it is read-only here (a read-only file or folder, or a read-only server): make it writable for this user, "
     "or pass --db with a writable location"),
    (r"unable to open database file",
     "its folder does not exist or cannot be written: create it or make it writable, or pass --db elsewhere"),
    (r"file is not a database|file is encrypted",
     "that file is not a SQLite database: move it away, or pass --db with another path"),
    (r"disk is full|no space left|could not extend file|disk full",
     "the disk holding it is full: free some space and run again (the rows measured so far are kept)"),
    (r"database is locked",
     f"another process held it locked for over {SQLITE_BUSY_TIMEOUT_S} s: wait for that process, or give "
     "concurrent lab hosts a PostgreSQL --db"),
    (r"value too long|right truncation",
     "a name or run id is longer than its column allows: shorten it, or let the database owner widen the column"),
    (r'(database|role) "[^"]*" does not exist|password authentication failed',
     "the server has no such database or user, or refused the password: fix --db / DEPLOYTOOL_DB, or create the "
     "database first"),
    (r"permission denied|must be owner",
     "the database user lacks rights on deploytool's tables (runs, results): grant them, or use another --db"),
    (r"no such (table|column)|(relation|column) .* does not exist",
     "its tables are not the ones deploytool made: point --db / DEPLOYTOOL_DB at deploytool's own database"),
))
_FIX_DEFAULT = "check --db / DEPLOYTOOL_DB and that the server is running and reachable"


def _mask_in_text(text: str) -> str:
    return _QUERY_SECRET.sub(r"\g<head>***", _USERINFO.sub(r"\g<head>:***@", str(text)))


def mask_url(url: str) -> str:
    """`url` with its password replaced by ***; works on URLs that do not parse, even without a scheme."""
    url = str(url)
    return _mask_in_text(url if "://" in url else _BARE_USERINFO.sub(r"\g<head>:***@", url))


def _secrets(url: str) -> list[str]:
    """The passwords in `url` (as typed, their pieces around an unescaped "@", and as SQLAlchemy parses them),
    to scrub from driver messages, which may quote a misparsed host such as "rest-of-password@host"."""
    typed = [m.group("pw") for m in (_USERINFO if "://" in url else _BARE_USERINFO).finditer(url)]
    typed += [m.group(0).split("=", 1)[1] for m in _QUERY_SECRET.finditer(url)]
    try:
        from sqlalchemy.engine import make_url

        typed.append(make_url(url).password or "")
    except Exception:
        pass
    found = {piece for s in typed for piece in [s, *s.split("@")]}
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)  # shorter ones would mangle the text


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _number(v: Any) -> float | int | None:
    """A metric for a numeric column: a finite number, else NULL (NaN and ±inf have no place in SQL or JSON)."""
    if hasattr(v, "item") and not isinstance(v, (bool, int, float)):  # numpy scalars
        try:
            v = v.item()
        except (TypeError, ValueError):  # an array is no single number
            return None
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):  # how older versions of this store kept non-finite numbers ("nan", "inf")
        try:
            v = float(v)
        except ValueError:
            return None
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) else None
    return None


def _jsonable(obj: Any) -> Any:
    """Plain JSON values; non-finite floats become null (PostgreSQL's JSON rejects NaN, strict parsers too)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return _jsonable(obj.tolist())
    return str(obj)


def _read_metrics(metrics: Any) -> dict[str, Any]:
    """Metrics as stored; a non-finite number written by an older version as "nan"/"inf" reads back as None."""
    out = {}
    for k, v in dict(metrics or {}).items():
        if isinstance(v, str):
            try:
                v = None if not math.isfinite(float(v)) else v
            except ValueError:
                pass
        out[k] = v
    return out


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


class Store:
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
                             f"({self._scrub(e)}); {URL_HINT}") from None
        self._define_tables()
        self._create_schema()

    def _define_tables(self) -> None:
        sa = self.sa
        # Keys are bounded (the CLI bounds run ids and names far below 255); names and free text are unbounded.
        self.metadata = md = sa.MetaData()
        self.runs = sa.Table(
            "runs", md,
            sa.Column("run_id", sa.String(255), primary_key=True),
            sa.Column("model", sa.Text),
            sa.Column("status", sa.String(64)),
            sa.Column("host", sa.Text),
            sa.Column("created_at", sa.String(40)),
            sa.Column("updated_at", sa.String(40)),
            sa.Column("request", sa.JSON),
        )
        self.results = sa.Table(
            "results", md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("run_id", sa.String(255), index=True, nullable=False),
            sa.Column("combo_key", sa.String(255), nullable=False),
            sa.Column("model", sa.Text),
            sa.Column("dataset", sa.Text),
            sa.Column("framework", sa.String(64)),
            sa.Column("format", sa.String(64)),
            sa.Column("quantize", sa.String(64)),
            sa.Column("target", sa.String(64)),
            sa.Column("device", sa.Text),
            sa.Column("backend", sa.String(64)),
            sa.Column("runtime", sa.String(64)),  # schema 2
            sa.Column("schema_version", sa.Integer),  # schema 2; NULL in rows an older version wrote
            sa.Column("status", sa.String(64)),
            sa.Column("reason", sa.Text),
            sa.Column("verdict", sa.String(64)),
            *[sa.Column(m, sa.Float) for m in METRIC_COLUMNS],
            sa.Column("details", sa.JSON),
            sa.Column("outputs_path", sa.Text),
            sa.Column("created_at", sa.String(40)),
            sa.UniqueConstraint("run_id", "combo_key", name="uq_run_combo"),
        )
        # one row per distinct bug (deploytool.bugs.findings): its signature, where and when it was seen, what was installed
        self.findings_table = sa.Table(
            "findings", md,
            sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("signature", sa.JSON),
            sa.Column("owner", sa.Text),
            sa.Column("title", sa.Text),
            sa.Column("first_seen", sa.String(40)),
            sa.Column("last_seen", sa.String(40)),
            sa.Column("occurrences", sa.Integer),
            sa.Column("runs", sa.JSON),  # run ids, in the order first seen
            sa.Column("versions", sa.JSON),  # package -> versions it was seen with
            sa.Column("last_versions", sa.JSON),  # package -> version at the last sighting
            sa.Column("examples", sa.JSON),  # row labels it was seen in
            sa.Column("bundle", sa.Text),  # the latest bug bundle of it
            sa.Column("not_seen_since", sa.Text),  # e.g. "tfjs-tflite 0.0.1-alpha.11" once a run no longer shows it
        )

        # the points of a study run (deploytool/study/): one JSON payload per measured point, keyed within the run
        self.study_points = sa.Table(
            "study_points", md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("run_id", sa.String(255), index=True, nullable=False),
            sa.Column("study", sa.String(64)),
            sa.Column("point_key", sa.String(255), nullable=False),
            sa.Column("payload", sa.JSON),
            sa.Column("created_at", sa.String(40)),
            sa.UniqueConstraint("run_id", "point_key", name="uq_run_point"),
        )

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
        have = {c["name"] for c in sa.inspect(self.engine).get_columns(self.results.name)}
        missing = [col for col in self.results.columns if col.name not in have]
        if missing:
            with self.engine.begin() as c:
                for col in missing:
                    c.execute(sa.text(f'ALTER TABLE {self.results.name} ADD COLUMN "{col.name}" '
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
    def _scrub(self, e: BaseException) -> str:
        """The first line of an error's message with any password in it masked."""
        line = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        for s in self._secrets:
            line = line.replace(s, "***")
        return _mask_in_text(line)

    def _explain(self, doing: str, e: BaseException) -> str:
        line = self._scrub(e)
        fix = next((fix for pattern, fix in _FIXES if pattern.search(line)), _FIX_DEFAULT)
        return f"{doing} the results database {self.url}: {line}; {fix}"

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn any database failure inside the block into a one-line StoreError."""
        try:
            yield
        except self.sa.exc.SQLAlchemyError as e:
            raise StoreError(self._explain(doing, e)) from None

    def _upsert(self, table: Any, row: dict[str, Any], keys: tuple[str, ...], update: Iterable[str]) -> Any:
        """INSERT ... ON CONFLICT (keys) DO UPDATE: one atomic statement, so concurrent writers of the same row
        never collide and the last one wins (a delete-then-insert raced into duplicate-key errors)."""
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        stmt = insert(table).values(**row)
        return stmt.on_conflict_do_update(index_elements=list(keys), set_={k: stmt.excluded[k] for k in update})

    # runs -------------------------------------------------------------
    def start_run(self, run_id: str, model: str, request: dict[str, Any]) -> None:
        """Record a run as running; starting it again (a resume, or a second host) keeps its first request."""
        row = {"run_id": run_id, "model": model, "host": host_name(), "status": "running",
               "created_at": _now(), "updated_at": _now(), "request": _jsonable(request)}
        with self._errors("cannot record the run in"), self.engine.begin() as c:
            c.execute(self._upsert(self.runs, row, ("run_id",), ("status", "updated_at")))

    def finish_run(self, run_id: str, status: str = "complete") -> None:
        with self._errors("cannot record the end of the run in"), self.engine.begin() as c:
            c.execute(self.runs.update().where(self.runs.c.run_id == run_id)
                      .values(status=status, updated_at=_now()))

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]:
        sa = self.sa
        with self._errors("cannot list the runs in"), self.engine.connect() as c:
            rows = c.execute(sa.select(self.runs).order_by(self.runs.c.created_at.desc()).limit(limit)).mappings()
            return [dict(r) for r in rows]

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        sa = self.sa
        with self._errors("cannot read the run from"), self.engine.connect() as c:
            row = c.execute(sa.select(self.runs).where(self.runs.c.run_id == run_id)).mappings().first()
            if row is None:  # allow a unique prefix, as git does ("_" and "%" in it are literal)
                rows = c.execute(sa.select(self.runs).where(self.runs.c.run_id.startswith(run_id, autoescape=True))
                                 .limit(2)).mappings().all()
                row = rows[0] if len(rows) == 1 else None
            return dict(row) if row else None

    # results ----------------------------------------------------------
    def save(self, r: Result) -> None:
        """Insert the result, or replace the stored row of the same run and combination (a re-run's retry)."""
        row = _result_row(r)
        keys = ("run_id", "combo_key")
        with self._errors("cannot save a result in"), self.engine.begin() as c:
            c.execute(self._upsert(self.results, row, keys, [k for k in row if k not in keys]))

    def results_for(self, run_id: str) -> list[Result]:
        sa = self.sa
        with self._errors("cannot read the results from"), self.engine.connect() as c:
            rows = c.execute(sa.select(self.results).where(self.results.c.run_id == run_id)
                             .order_by(self.results.c.id)).mappings().all()
        return [self._to_result(dict(r)) for r in rows]

    def final_keys(self, run_id: str) -> set[str]:
        """Combinations of this run already finished for good (not to be measured again)."""
        sa = self.sa
        with self._errors("cannot read the results from"), self.engine.connect() as c:
            rows = c.execute(sa.select(self.results.c.combo_key).where(sa.and_(
                self.results.c.run_id == run_id, self.results.c.status.in_(FINAL_STATUSES))))
            return {r[0] for r in rows}

    def history(self, model: str, combo_keys: Iterable[str], before_run: str) -> dict[str, Result]:
        """The latest measured result of each combination in earlier runs (for regression flags)."""
        sa = self.sa
        keys = list(combo_keys)
        out: dict[str, Result] = {}
        with self._errors("cannot read the history from"), self.engine.connect() as c:
            # Latest by the time it was measured: an upsert keeps a row's id, so the id alone is first-insert order.
            rows = c.execute(sa.select(self.results).where(sa.and_(
                self.results.c.model == model, self.results.c.combo_key.in_(keys),
                self.results.c.run_id != before_run, self.results.c.status == "measured"))
                .order_by(self.results.c.created_at, self.results.c.id)).mappings().all()
        for r in rows:
            out[r["combo_key"]] = self._to_result(dict(r))
        return out

    # study points -------------------------------------------------------
    def save_point(self, run_id: str, study: str, key: str, payload: dict[str, Any]) -> None:
        """Insert one point of a study run, or replace the stored point of the same key (a re-measured point)."""
        row = {"run_id": run_id, "study": study, "point_key": key, "payload": _jsonable(payload), "created_at": _now()}
        keys = ("run_id", "point_key")
        with self._errors("cannot save a study point in"), self.engine.begin() as c:
            c.execute(self._upsert(self.study_points, row, keys, [k for k in row if k not in keys]))

    def points(self, run_id: str) -> dict[str, dict[str, Any]]:
        """A study run's points by key, in the order they were first stored."""
        t = self.study_points
        with self._errors("cannot read the study points from"), self.engine.connect() as c:
            rows = c.execute(self.sa.select(t.c.point_key, t.c.payload).where(t.c.run_id == run_id)
                             .order_by(t.c.id)).all()
        return {k: dict(v or {}) for k, v in rows}

    # findings -----------------------------------------------------------
    def record_finding(self, key: str, signature: dict[str, Any], owner: str, title: str, run_id: str,
                       versions: dict[str, str], example: str, bundle: str) -> dict[str, Any]:
        """Add one sighting of a finding (created on its first); returns the finding as stored."""
        sa, t = self.sa, self.findings_table
        now = _now()
        with self._errors("cannot record a finding in"), self.engine.begin() as c:
            c.execute(self._insert_missing(t, key, signature, owner, title, now))
            q = sa.select(t).where(t.c.id == key)
            if self.engine.dialect.name == "postgresql":
                q = q.with_for_update()
            f = _finding_row(c.execute(q).mappings().one())
            update = _sighting(f, title, run_id, versions, example, bundle, now)
            c.execute(t.update().where(t.c.id == key).values(**update))
            return {**f, **update}

    def _insert_missing(self, t: Any, key: str, signature: dict[str, Any], owner: str, title: str, now: str) -> Any:
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        row = {"id": key, "signature": _jsonable(signature), "owner": owner, "title": title, "first_seen": now,
               "last_seen": now, "occurrences": 0, "runs": [], "versions": {}, "last_versions": {}, "examples": [],
               "bundle": ""}
        return insert(t).values(**row).on_conflict_do_nothing(index_elements=["id"])

    def mark_finding_absent(self, key: str, run_id: str, changed: dict[str, str]) -> None:
        """A run that ran the finding's combinations without it: "not seen since" the packages that changed."""
        t = self.findings_table
        since = ", ".join(f"{p} {v}" for p, v in sorted(changed.items())) or f"run {run_id}"
        with self._errors("cannot update a finding in"), self.engine.begin() as c:
            c.execute(t.update().where(t.c.id == key).where(t.c.not_seen_since.is_(None)).values(not_seen_since=since))

    def findings(self) -> list[dict[str, Any]]:
        t = self.findings_table
        with self._errors("cannot read the findings from"), self.engine.connect() as c:
            rows = c.execute(self.sa.select(t).order_by(t.c.last_seen.desc(), t.c.id)).mappings().all()
        return [_finding_row(r) for r in rows]

    def get_finding(self, prefix: str) -> dict[str, Any] | None:
        """A finding by its id or a unique prefix of it."""
        matches = [f for f in self.findings() if f["id"].startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    @staticmethod
    def _to_result(row: dict[str, Any]) -> Result:
        details = dict(row["details"] or {})
        combo = {"framework": row["framework"], "format": row["format"], "quantize": row["quantize"],
                 "target": row["target"], "device": row["device"] or "", "backend": row["backend"] or "",
                 "runtime": row.get("runtime") or ""}
        base = {"run_id": row["run_id"], "combo_key": row["combo_key"], "model": row["model"],
                "dataset": row["dataset"], "combo": combo, "status": row["status"], "reason": row["reason"] or "",
                "outputs_path": row["outputs_path"] or "", "created_at": row["created_at"] or ""}
        if (row.get("schema_version") or 1) >= 2:
            return Result.from_json({**details, **base, "schema": row["schema_version"]})
        # a row an older version wrote: flat metrics and a details bag, upgraded on read
        return Result.from_json({**base, "schema": 1, "metrics": _read_metrics(details.pop("metrics", {})),
                                 "details": details})


def _result_row(r: Result) -> dict[str, Any]:
    """A result as a row of the results table (both stores write this)."""
    metrics = r.metrics
    doc = r.to_json()
    return {
        "run_id": r.run_id, "combo_key": r.combo_key, "model": r.model, "dataset": r.dataset,
        "framework": r.combo.framework, "format": r.combo.format, "quantize": r.combo.quantize,
        "target": r.combo.target, "device": r.combo.device, "backend": r.combo.backend,
        "runtime": r.combo.runtime, "schema_version": SCHEMA_VERSION,
        "status": r.status.value, "reason": r.reason, "verdict": r.verdict and r.verdict.value,
        **{m: _number(metrics.get(m)) for m in METRIC_COLUMNS},
        "details": _jsonable({k: v for k, v in doc.items() if k not in _COLUMNS}),
        "outputs_path": r.outputs_path, "created_at": r.created_at or _now(),
    }


def _sighting(f: dict[str, Any], title: str, run_id: str, versions: dict[str, str], example: str, bundle: str,
              now: str) -> dict[str, Any]:
    """The columns of stored finding `f` that one more sighting changes (both stores apply this)."""
    seen = {p: sorted(set(f["versions"].get(p, [])) | {v}) for p, v in versions.items()}
    return {"last_seen": now, "occurrences": int(f["occurrences"] or 0) + 1, "title": title,
            "runs": f["runs"] + ([run_id] if run_id not in f["runs"] else []),
            "versions": {**f["versions"], **seen}, "last_versions": dict(versions),
            "examples": f["examples"] + ([example] if example not in f["examples"] else []),
            "bundle": bundle or f["bundle"], "not_seen_since": None}


def _finding_row(row: Any) -> dict[str, Any]:
    d = dict(row)
    for k, empty in (("runs", []), ("versions", {}), ("last_versions", {}), ("examples", []), ("signature", {})):
        d[k] = d.get(k) or empty
    return d
