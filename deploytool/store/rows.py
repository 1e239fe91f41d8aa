"""What both stores write and read, defined once: the tables (`TABLES`: the standard library's store renders
their SQL, SQLAlchemy's builds its `Table`s from them, so the two make the same file), a `Result` as a row of
the results table and back, a run's and a study point's row, a finding's first row and what one more sighting
changes, and the cleaning of numbers and JSON on the way in. No database is touched here."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence

from deploytool.provenance import host_name
from deploytool.result import SCHEMA_VERSION, Result
from deploytool.store.records import Finding
from deploytool.value import value

# Numbers kept as real columns so a lab can query them in SQL; the rest is JSON.
METRIC_COLUMNS = ("accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "flipped_count",
                  "max_abs_error", "mean_abs_error", "p50_ms", "p90_ms", "p99_ms", "mean_ms",
                  "latency_ratio_p50", "latency_ratio_p90", "memory_bytes", "memory_ratio", "size_bytes",
                  "size_ratio", "load_ms", "first_inference_ms")

# what the store keeps in columns of its own rather than in the details document
_COLUMNS = ("schema", "run_id", "combo_key", "model", "dataset", "combo", "status", "reason", "outputs_path",
            "created_at")


# ------------------------------------------------------------------ tables
@value
class Column:
    name: str
    kind: str  # INTEGER, TEXT, FLOAT, JSON; VARCHAR with a length
    length: int | None = None
    primary_key: bool = False
    nullable: bool = True  # a primary key is NOT NULL whatever this says
    index: bool = False  # an index of its own, ix_<table>_<column>

    @property
    def sql_type(self) -> str:
        return f"{self.kind}({self.length})" if self.length else self.kind

    @property
    def not_null(self) -> bool:
        return self.primary_key or not self.nullable


@value
class Table:
    name: str
    columns: tuple[Column, ...]
    unique: tuple[str, tuple[str, ...]] | None = None  # (constraint name, its columns)

    @property
    def json_columns(self) -> frozenset[str]:
        return frozenset(c.name for c in self.columns if c.kind == "JSON")


def _key(name: str, length: int = 255, **kw: Any) -> Column:
    return Column(name, "VARCHAR", length, **kw)


def _text(name: str) -> Column:
    return Column(name, "TEXT")


def _word(name: str) -> Column:
    return Column(name, "VARCHAR", 64)


def _time(name: str) -> Column:
    return Column(name, "VARCHAR", 40)


# Keys are bounded (the CLI bounds run ids and names far below 255); names and free text are unbounded.
RUNS = Table("runs", (
    _key("run_id", primary_key=True), _text("model"), _word("status"), _text("host"), _time("created_at"),
    _time("updated_at"), Column("request", "JSON"),
))
RESULTS = Table("results", (
    Column("id", "INTEGER", primary_key=True),
    _key("run_id", nullable=False, index=True), _key("combo_key", nullable=False),
    _text("model"), _text("dataset"), _word("framework"), _word("format"), _word("quantize"), _word("target"),
    _text("device"), _word("backend"),
    _word("runtime"),  # schema 2
    Column("schema_version", "INTEGER"),  # schema 2; NULL in rows an older version wrote
    _word("status"), _text("reason"), _word("verdict"),
    _word("triage"),  # a failing row's class (deploytool.bugs.triage); NULL for passing rows and older rows
    *(Column(m, "FLOAT") for m in METRIC_COLUMNS),
    Column("details", "JSON"), _text("outputs_path"), _time("created_at"),
), unique=("uq_run_combo", ("run_id", "combo_key")))
# one row per distinct bug (deploytool.bugs.findings; records.Finding): its signature, where and when it was seen,
# what was installed
FINDINGS = Table("findings", (
    _key("id", 64, primary_key=True), Column("signature", "JSON"), _text("owner"), _text("title"),
    _time("first_seen"), _time("last_seen"), Column("occurrences", "INTEGER"),
    Column("runs", "JSON"),  # run ids, in the order first seen
    Column("versions", "JSON"),  # package -> versions it was seen with
    Column("last_versions", "JSON"),  # package -> version at the last sighting
    Column("examples", "JSON"),  # row labels it was seen in
    _text("bundle"),  # the latest bug bundle of it
    _text("not_seen_since"),  # e.g. "tfjs-tflite 0.0.1-alpha.11" once a run no longer shows it
    Column("triage", "JSON"),  # its class and evidence at the last sighting (result.Triage); NULL: not triaged
    Column("confirmation", "JSON"),  # an upstream candidate's bare reproducer: its state, command and output
))
# the points of a study run (deploytool/study/): one JSON payload per measured point, keyed within the run
STUDY_POINTS = Table("study_points", (
    Column("id", "INTEGER", primary_key=True), _key("run_id", nullable=False, index=True), _word("study"),
    _key("point_key", nullable=False), Column("payload", "JSON"), _time("created_at"),
), unique=("uq_run_point", ("run_id", "point_key")))
TABLES = (RUNS, RESULTS, FINDINGS, STUDY_POINTS)


# ------------------------------------------------------------------ values
def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def number(v: Any) -> float | int | None:
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


def jsonable(obj: Any) -> Any:
    """Plain JSON values; non-finite floats become null (PostgreSQL's JSON rejects NaN, strict parsers too)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return jsonable(obj.tolist())
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


# ------------------------------------------------------------------ rows
def run_row(run_id: str, model: str, request: dict[str, Any]) -> dict[str, Any]:
    """A run's row at its (first) start: running, on this host."""
    return {"run_id": run_id, "model": model, "host": host_name(), "status": "running",
            "created_at": now(), "updated_at": now(), "request": jsonable(request)}


RUN_RESTART_COLUMNS = ("status", "updated_at")  # what starting a stored run again changes (it keeps its request)


def result_row(r: Result) -> dict[str, Any]:
    """A result as a row of the results table."""
    metrics = r.metrics
    doc = r.to_json()
    return {
        "run_id": r.run_id, "combo_key": r.combo_key, "model": r.model, "dataset": r.dataset,
        "framework": r.combo.framework, "format": r.combo.format, "quantize": r.combo.quantize,
        "target": r.combo.target, "device": r.combo.device, "backend": r.combo.backend,
        "runtime": r.combo.runtime, "schema_version": SCHEMA_VERSION,
        "status": r.status.value, "reason": r.reason, "verdict": r.verdict and r.verdict.value,
        "triage": r.triage.klass if r.triage is not None else None,
        **{m: number(metrics.get(m)) for m in METRIC_COLUMNS},
        "details": jsonable({k: v for k, v in doc.items() if k not in _COLUMNS}),
        "outputs_path": r.outputs_path, "created_at": r.created_at or now(),
    }


def result_of_row(row: dict[str, Any]) -> Result:
    """The Result of a results row (JSON columns parsed); a row an older schema wrote is upgraded on read."""
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


def latest_results(order: Sequence[tuple[str, int]],
                   read: Callable[[list[int]], Iterable[dict[str, Any]]]) -> dict[str, Result]:
    """A store's history: each combination's latest measured result. `order` is (combo_key, id) of every candidate
    row, oldest first (by when it was measured: an upsert keeps a row's id); `read(ids)` reads those rows whole.
    Only the latest row of each combination is read and parsed, however many runs measured it."""
    latest = {key: row_id for key, row_id in order}
    found = {r["combo_key"]: result_of_row(r) for r in read(list(latest.values()))} if latest else {}
    return {key: found[key] for key in dict.fromkeys(key for key, _ in order)}


def point_row(run_id: str, study: str, key: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": run_id, "study": study, "point_key": key, "payload": jsonable(payload), "created_at": now()}


def new_finding_row(key: str, signature: dict[str, Any], owner: str, title: str, at: str) -> dict[str, Any]:
    """A finding's row before its first sighting (inserted when missing; the sighting then counts it)."""
    return {"id": key, "signature": jsonable(signature), "owner": owner, "title": title, "first_seen": at,
            "last_seen": at, "occurrences": 0, "runs": [], "versions": {}, "last_versions": {}, "examples": [],
            "bundle": ""}


SIGHTING_COLUMNS = ("last_seen", "occurrences", "title", "runs", "versions", "last_versions", "examples", "bundle",
                    "not_seen_since", "owner", "triage")


def sighting(f: Finding, title: str, run_id: str, versions: dict[str, str], example: str, bundle: str,
             at: str, owner: str = "", triage: dict[str, Any] | None = None) -> tuple[Finding, dict[str, Any]]:
    """Stored finding `f` after one more sighting, and the columns of its row that changed (SIGHTING_COLUMNS):
    the latest sighting's owner and triage replace the stored ones (a finding stored before triage existed is
    triaged again when next seen)."""
    seen = {p: tuple(sorted(set(f.versions.get(p, ())) | {v})) for p, v in versions.items()}
    after = replace(f, last_seen=at, occurrences=f.occurrences + 1, title=title,
                    runs=f.runs + ((run_id,) if run_id not in f.runs else ()),
                    versions={**f.versions, **seen}, last_versions=dict(versions),
                    examples=f.examples + ((example,) if example not in f.examples else ()),
                    bundle=bundle or f.bundle, not_seen_since=None, owner=owner or f.owner,
                    triage=dict(jsonable(triage)) if triage is not None else f.triage)
    row = after.to_json()
    return after, {k: row[k] for k in SIGHTING_COLUMNS}


def not_seen_since(run_id: str, changed: dict[str, str]) -> str:
    """What a finding absent from a run that ran its combinations is "not seen since": the packages that changed."""
    return ", ".join(f"{p} {v}" for p, v in sorted(changed.items())) or f"run {run_id}"
