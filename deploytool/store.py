"""`Store`: the results database behind SQLAlchemy — a SQLite file in the
workspace by default, a PostgreSQL URL (`--db` / DEPLOYTOOL_DB) for a lab of
several hosts. Each result is committed as soon as its combination finishes,
so an interrupted run loses nothing measured and a re-run can resume. The
store persists and queries; it never measures or judges.
"""

from __future__ import annotations

import datetime as dt
import platform
from typing import Any, Iterable

from deploytool.errors import StoreError
from deploytool.result import FINAL_STATUSES, Combo, Result

# Numbers kept as real columns so a lab can query them in SQL; the rest is JSON.
METRIC_COLUMNS = ("accuracy", "baseline_accuracy", "accuracy_delta_points", "agreement", "flipped_count",
                  "max_abs_error", "mean_abs_error", "p50_ms", "p90_ms", "p99_ms", "mean_ms",
                  "latency_ratio_p50", "latency_ratio_p90", "memory_bytes", "memory_ratio", "size_bytes",
                  "size_ratio", "load_ms", "first_inference_ms")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _finite(v: Any) -> Any:
    # PostgreSQL's JSON rejects NaN/Infinity; keep them as strings there and in columns as NULL.
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    return v


def _jsonable(obj: Any) -> Any:
    """Plain JSON values; non-finite floats become their names (PostgreSQL's JSON rejects NaN)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and _finite(obj) is None:
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if hasattr(obj, "item"):  # numpy scalars
        return _jsonable(obj.item())
    return str(obj)


class Store:
    def __init__(self, url: str):
        try:
            import sqlalchemy as sa
        except ImportError as e:  # pragma: no cover - setup installs it
            raise StoreError("SQLAlchemy is missing: run `make setup`") from e
        self.sa = sa
        self.url = url
        try:
            self.engine = sa.create_engine(url, future=True)
        except Exception as e:
            raise StoreError(f"--db {url!r} is not a usable database URL ({e}); use sqlite:///path.db "
                             "or postgresql+psycopg://user:pass@host/db") from None
        md = sa.MetaData()
        self.runs = sa.Table(
            "runs", md,
            sa.Column("run_id", sa.String(64), primary_key=True),
            sa.Column("model", sa.String(200)),
            sa.Column("status", sa.String(32)),
            sa.Column("host", sa.String(200)),
            sa.Column("created_at", sa.String(40)),
            sa.Column("updated_at", sa.String(40)),
            sa.Column("request", sa.JSON),
        )
        self.results = sa.Table(
            "results", md,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("run_id", sa.String(64), index=True, nullable=False),
            sa.Column("combo_key", sa.String(64), nullable=False),
            sa.Column("model", sa.String(200)),
            sa.Column("dataset", sa.String(200)),
            sa.Column("framework", sa.String(32)),
            sa.Column("format", sa.String(32)),
            sa.Column("quantize", sa.String(32)),
            sa.Column("target", sa.String(32)),
            sa.Column("device", sa.String(200)),
            sa.Column("backend", sa.String(32)),
            sa.Column("status", sa.String(32)),
            sa.Column("reason", sa.Text),
            sa.Column("verdict", sa.String(16)),
            *[sa.Column(m, sa.Float) for m in METRIC_COLUMNS],
            sa.Column("details", sa.JSON),
            sa.Column("outputs_path", sa.Text),
            sa.Column("created_at", sa.String(40)),
            sa.UniqueConstraint("run_id", "combo_key", name="uq_run_combo"),
        )
        try:
            md.create_all(self.engine)
        except Exception as e:
            raise StoreError(f"cannot open the results database {self._safe_url()}: {str(e).splitlines()[0]}; "
                             "check --db / DEPLOYTOOL_DB and that the server is running") from None

    def _safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    # runs -------------------------------------------------------------
    def start_run(self, run_id: str, model: str, request: dict[str, Any]) -> None:
        sa = self.sa
        with self.engine.begin() as c:
            exists = c.execute(sa.select(self.runs.c.run_id).where(self.runs.c.run_id == run_id)).first()
            values = {"status": "running", "updated_at": _now()}
            if exists:
                c.execute(self.runs.update().where(self.runs.c.run_id == run_id).values(**values))
            else:
                c.execute(self.runs.insert().values(run_id=run_id, model=model, host=platform.node(),
                                                    created_at=_now(), request=_jsonable(request), **values))

    def finish_run(self, run_id: str, status: str = "complete") -> None:
        with self.engine.begin() as c:
            c.execute(self.runs.update().where(self.runs.c.run_id == run_id)
                      .values(status=status, updated_at=_now()))

    def list_runs(self, limit: int = 50) -> list[dict[str, Any]]:
        sa = self.sa
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.runs).order_by(self.runs.c.created_at.desc()).limit(limit)).mappings()
            return [dict(r) for r in rows]

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        sa = self.sa
        with self.engine.connect() as c:
            row = c.execute(sa.select(self.runs).where(self.runs.c.run_id == run_id)).mappings().first()
            if row is None:  # allow a unique prefix, as git does
                rows = c.execute(sa.select(self.runs).where(self.runs.c.run_id.like(f"{run_id}%"))).mappings().all()
                row = rows[0] if len(rows) == 1 else None
            return dict(row) if row else None

    # results ----------------------------------------------------------
    def save(self, r: Result) -> None:
        sa = self.sa
        row = {
            "run_id": r.run_id, "combo_key": r.combo_key, "model": r.model, "dataset": r.dataset,
            "framework": r.combo.framework, "format": r.combo.format, "quantize": r.combo.quantize,
            "target": r.combo.target, "device": r.combo.device, "backend": r.combo.backend,
            "status": r.status, "reason": r.reason, "verdict": r.verdict,
            **{m: _finite(r.metrics.get(m)) for m in METRIC_COLUMNS},
            "details": _jsonable({"metrics": r.metrics, **r.details}), "outputs_path": r.outputs_path,
            "created_at": r.created_at or _now(),
        }
        with self.engine.begin() as c:
            c.execute(self.results.delete().where(sa.and_(self.results.c.run_id == r.run_id,
                                                          self.results.c.combo_key == r.combo_key)))
            c.execute(self.results.insert().values(**row))

    def results_for(self, run_id: str) -> list[Result]:
        sa = self.sa
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.results).where(self.results.c.run_id == run_id)
                             .order_by(self.results.c.id)).mappings().all()
        return [self._to_result(dict(r)) for r in rows]

    def final_keys(self, run_id: str) -> set[str]:
        """Combinations of this run already finished for good (not to be measured again)."""
        sa = self.sa
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.results.c.combo_key).where(sa.and_(
                self.results.c.run_id == run_id, self.results.c.status.in_(FINAL_STATUSES))))
            return {r[0] for r in rows}

    def history(self, model: str, combo_keys: Iterable[str], before_run: str) -> dict[str, Result]:
        """The latest measured result of each combination in earlier runs (for regression flags)."""
        sa = self.sa
        keys = list(combo_keys)
        out: dict[str, Result] = {}
        with self.engine.connect() as c:
            rows = c.execute(sa.select(self.results).where(sa.and_(
                self.results.c.model == model, self.results.c.combo_key.in_(keys),
                self.results.c.run_id != before_run, self.results.c.status == "measured"))
                .order_by(self.results.c.id)).mappings().all()
        for r in rows:
            out[r["combo_key"]] = self._to_result(dict(r))
        return out

    @staticmethod
    def _to_result(row: dict[str, Any]) -> Result:
        details = dict(row["details"] or {})
        metrics = details.pop("metrics", {})
        combo = Combo(row["framework"], row["format"], row["quantize"], row["target"], row["device"] or "",
                      row["backend"] or "")
        return Result(run_id=row["run_id"], combo_key=row["combo_key"], model=row["model"], dataset=row["dataset"],
                      combo=combo, status=row["status"], reason=row["reason"] or "", verdict=row["verdict"],
                      metrics=metrics, details=details, outputs_path=row["outputs_path"] or "",
                      created_at=row["created_at"])


def open_store(url: str | None, default_url: str) -> Store:
    import os

    return Store(url or os.environ.get("DEPLOYTOOL_DB") or default_url)
