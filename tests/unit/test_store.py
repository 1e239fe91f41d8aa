"""Unit tests for deploytool.store on real SQLite files: the round trip, resume
and history; non-finite numbers (stored as NULL, read back as None, shown as
"n/a"); database URLs whose password must never be echoed; read-only, missing
and full databases as one-line StoreErrors; and independence from the working
directory. Several processes at once: tests/integration/test_store_concurrency.py
(SQLite) and test_store_postgres.py (a real PostgreSQL server)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from deploytool import cli
from deploytool.errors import StoreError
from deploytool.migrate import resume_order
from deploytool.report import ReportInput, summary_rows
from deploytool.report import html, numbers, text
from deploytool.result import Check
from deploytool.result import Combo, Result
from tests import results as factory
from deploytool.store import SqlAlchemyStore, mask_url, open_store
from deploytool.store.sqlite import SqliteStore, sqlite_target
from tests.conftest import run_cli


@pytest.fixture(params=[SqlAlchemyStore, SqliteStore], ids=["sqlalchemy", "sqlite3"])
def store_class(request):
    """Both stores of a SQLite file: SQLAlchemy's (PostgreSQL's too) and the standard library's (the default)."""
    return request.param


def raw_row(db: Path, sql: str) -> tuple:
    """One row as the file holds it, read past either store."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as c:
        (row,) = c.execute(sql).fetchall()
    return row


def make(run_id, key, status="measured", acc=0.9, created_at=""):
    if status != "measured":
        return factory.result(run_id, key, status, notes=["n"], created_at=created_at)
    return factory.result(run_id, key, comparison=factory.comparison(accuracy=acc, max_abs_error=float("inf")),
                          measurement=factory.measurement(p50_ms=float("nan")), notes=["n"], created_at=created_at)


def test_roundtrip_resume_and_history(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.start_run("r1", "m", {"targets": ["host"], "path": tmp_path})
    store.save(make("r1", "a"))
    store.save(make("r1", "b", status="runtime_failed"))
    store.save(make("r1", "c", status="conversion_failed"))
    assert store.final_keys("r1") == {"a", "c"}  # a runtime fault is retried on re-run
    store.save(make("r1", "b", acc=0.8))  # the retry replaces the row, in place
    rows = store.results_for("r1")
    assert [r.combo_key for r in rows] == ["a", "b", "c"]
    b = rows[1]
    assert b.status == "measured" and b.metrics["accuracy"] == 0.8
    assert b.combo == Combo("keras", "tflite", "int8", "host")
    assert b.notes == ["n"] and b.metrics["max_abs_error"] is None and b.verdict == "pass"
    assert [f.index for f in b.comparison.flipped] == [1] and b.artifact == factory.artifact()
    store.finish_run("r1")
    assert store.get_run("r1").status == "complete" and store.get_run("r").run_id == "r1"
    store.start_run("r2", "m", {})
    store.save(make("r2", "a", acc=0.5))
    hist = store.history("m", ["a", "b"], before_run="r2")
    assert hist["a"].metrics["accuracy"] == 0.9 and hist["a"].run_id == "r1"
    # a second store on the same file sees everything (results survive the process)
    again = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    assert len(again.results_for("r1")) == 3 and {r.run_id for r in again.list_runs()} == {"r1", "r2"}


def test_a_resumed_run_measures_the_rows_that_ran_out_of_time_after_the_others(tmp_path, store_class):
    """Issue 38: a timeout is retried on resume (it may have been a hang), but after every other row still to
    measure, so a row too slow for its limit does not spend it again before anything new (the full atlas re-ran
    ConvNeXt-Tiny's 764 s web row first at every resume). The plan's order holds within each part."""

    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.start_run("r1", "m", {})
    for key, status in (("a", "measured"), ("b", "timeout"), ("c", "runtime_failed"), ("e", "timeout")):
        store.save(make("r1", key, status=status))
    combos = [Combo("keras", "tflite", q, "host") for q in ("none", "fp16", "dynamic", "int8", "int8-io")]
    keys = dict(zip(combos, "abcde"))
    todo = [c for c in combos if keys[c] not in store.final_keys("r1")]
    timed_out = {r.combo_key for r in store.results_for("r1") if r.status == "timeout"}
    assert [keys[c] for c in resume_order(todo, keys, timed_out)] == ["c", "d", "b", "e"]
    assert [keys[c] for c in resume_order(todo, keys, set())] == ["b", "c", "d", "e"]  # a fresh plan's order


def test_starting_a_run_again_keeps_its_first_request(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.start_run("r1", "m", {"n": 1})
    first = store.get_run("r1")
    store.finish_run("r1", "interrupted")
    store.start_run("r1", "m", {"n": 2})  # the resume of an interrupted run
    again = store.get_run("r1")
    assert again.status == "running" and again.request == {"n": 1} and again.created_at == first.created_at
    assert len(store.list_runs()) == 1


def test_history_is_the_latest_measurement_even_when_an_old_run_was_re_saved(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.save(make("r1", "a", acc=0.1, created_at="2025-01-01T00:00:00+00:00"))
    store.save(make("r2", "a", acc=0.2, created_at="2025-01-02T00:00:00+00:00"))
    store.save(make("r1", "a", acc=0.3, created_at="2025-01-03T00:00:00+00:00"))  # r1 re-run later: same row id
    assert store.history("m", ["a"], before_run="r3")["a"].metrics["accuracy"] == 0.3


def test_history_reads_one_row_per_combination_however_many_runs_measured_it(tmp_path, store_class, monkeypatch):
    """A model a lab measures every night: the report's history parses each combination's latest row only, not
    every night's (its cost stays flat as the store grows)."""
    from deploytool.store import rows

    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    for night in range(1, 29):
        store.save(make(f"r{night}", "a", acc=night / 100, created_at=f"2025-01-{night:02d}T00:00:00+00:00"))
    store.save(make("r3", "b", acc=0.5, created_at="2025-01-03T00:00:00+00:00"))
    store.save(make("r4", "b", status="runtime_failed", created_at="2025-01-04T00:00:00+00:00"))
    parsed: list[str] = []
    read = rows.result_of_row

    def counted(row: dict) -> Result:
        parsed.append(row["combo_key"])
        return read(row)

    monkeypatch.setattr(rows, "result_of_row", counted)
    hist = store.history("m", ["a", "b", "c"], before_run="r28")
    assert hist["a"].metrics["accuracy"] == 0.27 and hist["a"].run_id == "r27"  # r28 is the run itself
    assert hist["b"].run_id == "r3" and set(hist) == {"a", "b"}  # a failed row is no history; c was never measured
    assert sorted(parsed) == ["a", "b"]


def test_a_run_id_prefix_is_literal(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.start_run("a_1", "m", {})
    store.start_run("ab1", "m", {})
    assert store.get_run("a_").run_id == "a_1" and store.get_run("a") is None  # "a" is ambiguous


# ------------------------------------------------------------------ non-finite numbers
def test_metric_columns_hold_numbers_or_null(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.save(make("r", "a"))
    row = raw_row(tmp_path / "r.db", "select accuracy, max_abs_error, p50_ms from results")
    assert row[0] == 0.9 and row[1] is None and row[2] is None and not math.isnan(row[0])


def _nan_result() -> Result:
    nan, inf = float("nan"), float("inf")
    check = Check("agreement", nan, 0.99, 0.97, "fail")
    return factory.result(
        "r", "k", combo=Combo("keras", "onnx", "int8", "host"), artifact=factory.artifact(size_bytes=1000),
        comparison=factory.comparison(accuracy=0.5, agreement=nan, max_abs_error=inf, mean_abs_error=np.float32(nan),
                                      latency_ratio_p50=-inf, flipped=(), memory_ratio=nan, accuracy_delta_points=nan,
                                      checks=(check,), verdict="fail"),
        measurement=factory.measurement(p50_ms=np.float64(inf)), environment={"latency_ms": np.array([1.0, inf])})


def test_non_finite_numbers_are_stored_as_null_and_read_back_as_none(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.save(_nan_result())
    raw, agreement, p50 = raw_row(tmp_path / "r.db", "select details, agreement, p50_ms from results")
    details = json.loads(raw, parse_constant=lambda s: pytest.fail(f"{s} in the stored JSON"))  # strict JSON
    assert details["comparison"]["agreement"] is None and details["environment"]["latency_ms"] == [1.0, None]
    assert agreement is None and p50 is None
    r = store.results_for("r")[0]
    assert r.metrics["accuracy"] == 0.5 and r.metrics["size_bytes"] == 1000 and r.verdict == "fail"
    for k in ("agreement", "max_abs_error", "mean_abs_error", "latency_ratio_p50", "p50_ms"):
        assert r.metrics[k] is None, k
    assert r.comparison.checks[0].value is None


def test_rows_written_by_schema_1_are_upgraded_on_read(tmp_path, store_class):
    """A database an older deploytool wrote: no runtime/schema_version columns, flat metrics and a details bag
    (non-finite numbers as strings). Opening it adds the columns; its rows read back as typed Results."""
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("create table results (id integer primary key, run_id varchar(255) not null, combo_key varchar(255) "
                   "not null, model text, dataset text, framework varchar(64), format varchar(64), quantize varchar(64), "
                   "target varchar(64), device text, backend varchar(64), status varchar(64), reason text, verdict "
                   "varchar(64), accuracy float, details json, outputs_path text, created_at varchar(40), "
                   "constraint uq_run_combo unique (run_id, combo_key))")
        cmp_v1 = {**asdict(factory.comparison(accuracy=0.9, verdict="degraded")), "max_abs_error": "inf"}
        details = {"metrics": {"accuracy": 0.9, "p50_ms": 0.5, "max_abs_error": "inf", "size_ratio": "-inf",
                               "latency_samples": 3},
                   "comparison": cmp_v1, "artifact": factory.artifact().to_json(), "memory_bytes": {"x": 1.0},
                   "environment": {"runtime": "litert"}, "notes": ["old"], "tolerances": {"agreement": [0.99, 0.97]},
                   "stage_seconds": {"convert": 1.0, "runtime": 2.0}, "latency_samples_path": "outputs/k.latency.npy",
                   "bundle": "reports/old/bugs/x"}
        db.execute("insert into results (run_id, combo_key, model, dataset, framework, format, quantize, target, device, "
                   "backend, status, reason, verdict, accuracy, details, outputs_path, created_at) values "
                   "('old','k','m','d','keras','tflite','int8','host','','','measured','','degraded',0.9,?,"
                   "'outputs/k.npy','2025-01-01')", (json.dumps(details),))
        db.execute("insert into results (run_id, combo_key, model, dataset, framework, format, quantize, target, device, "
                   "backend, status, reason, details) values ('old','e','m','d','keras','tflite','int8','android','s',"
                   "'cpu','device_error','gone','{}')")
    store = store_class(f"sqlite:///{path}")
    measured, errored = store.results_for("old")
    assert measured.verdict == "degraded" and measured.status.final and not measured.failing
    assert measured.metrics["accuracy"] == 0.9 and measured.metrics["max_abs_error"] is None
    assert measured.measurement.p50_ms == 0.5 and measured.measurement.memory_bytes == {"x": 1.0}
    assert measured.times.runtime == 2.0 and measured.tolerances == {"agreement": (0.99, 0.97)}
    assert measured.latency_path == "outputs/k.latency.npy" and measured.bundle == "reports/old/bugs/x"
    assert measured.artifact == factory.artifact() and measured.notes == ["old"]
    assert errored.status == "error" and errored.failing and errored.combo.where == "android:cpu@s"
    store.save(replace(measured, run_id="new"))  # the upgraded row saves as schema 2 in the widened table
    again = store.results_for("new")[0]
    assert again.to_json() == replace(measured, run_id="new").to_json()  # non-finite numbers travel as null


def test_non_finite_numbers_render_as_n_a_in_every_table(tmp_path, store_class):
    store = store_class(f"sqlite:///{tmp_path / 'r.db'}")
    store.save(_nan_result())
    for results in (store.results_for("r"), [_nan_result()]):  # read back (None), and fresh (NaN/inf) floats
        inp = ReportInput(run_id="r", model="m", dataset="d", run_info={}, results=results, baselines={},
                          labels=[], y_true=np.zeros(0, int), images=np.zeros((0, 2, 2, 1)))
        rows = summary_rows(inp)
        assert rows[0].agreement is None and rows[0].max_abs_error is None
        terminal = text.plain_table(rows).splitlines()[2]
        md = next(ln for ln in text.markdown(inp, rows).splitlines() if ln.startswith("| keras->onnx"))
        page = html._summary_table(rows)
        doc = text.json_document(inp, rows)
        for shown in (terminal, md, page):
            assert "n/a" in shown and "50.00%" in shown, shown
            assert not any(w in shown.lower() for w in ("nan", "inf", "—")), shown
        assert md.split(" | ")[1:6] == ["50.00%", "n/a", "n/a", "0", "n/a"]  # acc, Δ, agree, flips, p50
        assert "agreement = n/a → fail" in text.markdown(inp, rows)
        json.dumps(doc, allow_nan=False)  # the JSON form stays strict
        assert doc["results"][0]["metrics"]["agreement"] is None


@pytest.mark.parametrize("fmt", [numbers.fmt_pct, numbers.fmt_points, numbers.fmt_ratio, numbers.fmt_ms,
                                 numbers.fmt_bytes, numbers.fmt_float, numbers.fmt_count, numbers.fmt_cosine])
@pytest.mark.parametrize("value", [None, float("nan"), float("inf"), -float("inf"), "nan", "inf", np.float32("nan")])
def test_every_number_format_shows_missing_and_non_finite_as_n_a(fmt, value):
    assert fmt(value) == "n/a"


# ------------------------------------------------------------------ URLs and their passwords
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mask_url_hides_passwords_even_in_urls_that_do_not_parse():
    assert mask_url("postgresql+psycopg://u:s3cret@host:notaport/db") == "postgresql+psycopg://u:***@host:notaport/db"
    assert mask_url("postgresql://u:p@ss:w@rd@h/db") == "postgresql://u:***@h/db"
    assert mask_url("postgresql://u@h/db?sslmode=require&password=s3cret") == \
        "postgresql://u@h/db?sslmode=require&password=***"
    assert mask_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_the_briefs_broken_url_on_the_command_line_is_one_line_without_its_password(tmp_path):
    r = run_cli("report", "--list", "--db", "postgresql+psycopg://u:s3cret@host:notaport/db",
                "--workspace", str(tmp_path))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "s3cret" not in r.stderr + r.stdout, r.stderr
    assert "u:***@host:notaport" in lines[0] and "sqlite:///" in lines[0]  # names the URL and the fix


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://u:s3cretXYZ@host:notaport/db",  # make_url fails on the port
    "u:s3cretXYZ@host/db",  # no scheme at all
    "postgresql+psycopg://u:s3cretXYZ@[::1/db",  # broken IPv6 host
    "nosuch://u:s3cretXYZ@h/db",  # unknown dialect
    "mysql://u:s3cretXYZ@h/db",  # a dialect deploytool does not keep results in
    "postgresql+psycopg://u:s3cr@tXYZ@127.0.0.1:{port}/db",  # an unescaped "@" in the password: misparsed host
    "postgresql+psycopg://u@127.0.0.1:{port}/db?password=s3cretXYZ",  # libpq password as a query parameter
    "postgresql+psycopg://u:s3cretXYZ@127.0.0.1:{port}/db",  # parses, but nothing listens there
])
@pytest.mark.parametrize("via", ["--db", "DEPLOYTOOL_DB"])
def test_a_broken_database_url_is_one_line_and_never_shows_its_password(tmp_path, capsys, monkeypatch, url, via):
    url = url.format(port=_closed_port())
    argv = ["report", "--list", "--workspace", str(tmp_path)]
    if via == "--db":
        argv += ["--db", url]
    else:
        monkeypatch.setenv("DEPLOYTOOL_DB", url)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("deploytool: error:"), err
    assert "XYZ" not in out + err and "s3cr" not in out + err, err


# ------------------------------------------------------------------ read-only, missing, full
@contextlib.contextmanager
def read_only(*paths: Path):
    """Make files/folders really read-only for this process. Tests run as root, which chmod does not stop:
    there the immutable attribute does (what a read-only mount or a foreign owner does to a user)."""
    root = os.geteuid() == 0
    for p in paths:
        if root:
            subprocess.run(["chattr", "+i", str(p)], check=True, capture_output=True)
        else:
            p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        yield
    finally:
        for p in paths:
            if root:
                subprocess.run(["chattr", "-i", str(p)], check=True, capture_output=True)
            else:
                p.chmod(0o755 if p.is_dir() else 0o644)


def _one_line_store_error(call) -> str:
    with pytest.raises(StoreError) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_a_read_only_results_file_reads_but_a_write_is_a_one_line_store_error(tmp_path, store_class):
    db = tmp_path / "results.db"
    store_class(f"sqlite:///{db}").save(make("r", "a"))
    with read_only(db, tmp_path):
        store = store_class(f"sqlite:///{db}")  # opening and reading need no write
        assert [r.combo_key for r in store.results_for("r")] == ["a"] and store.final_keys("r") == {"a"}
        for call in (lambda: store.save(make("r", "b")), lambda: store.start_run("r2", "m", {}),
                     lambda: store.finish_run("r")):
            msg = _one_line_store_error(call)
            assert "attempt to write a readonly database" in msg and str(db) in msg and "writable" in msg


def test_a_read_only_uri_is_a_one_line_store_error_on_write(tmp_path, store_class):
    db = tmp_path / "results.db"
    store_class(f"sqlite:///{db}").save(make("r", "a"))
    store = store_class(f"sqlite:///file:{db}?mode=ro&uri=true")
    assert len(store.results_for("r")) == 1
    assert "readonly database" in _one_line_store_error(lambda: store.save(make("r", "b")))


def test_report_list_works_on_a_read_only_results_file(tmp_path, capsys):
    db = tmp_path / "results.db"
    SqlAlchemyStore(f"sqlite:///{db}").start_run("ro-run", "m", {})
    with read_only(db, tmp_path):
        assert cli.main(["report", "--list", "--workspace", str(tmp_path)]) == 0
    assert "ro-run" in capsys.readouterr().out


def test_a_results_file_that_cannot_be_created_is_a_one_line_store_error(tmp_path, store_class):
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder):
        msg = _one_line_store_error(lambda: store_class(f"sqlite:///{folder / 'results.db'}"))
    assert "unable to open database file" in msg and "writable" in msg
    msg = _one_line_store_error(lambda: store_class(f"sqlite:///{tmp_path / 'no' / 'such' / 'results.db'}"))
    assert "does not exist" in msg


def test_a_file_that_is_not_a_database_is_a_one_line_store_error(tmp_path, store_class):
    (tmp_path / "results.db").write_bytes(b"not sqlite at all " * 100)
    msg = _one_line_store_error(lambda: store_class(f"sqlite:///{tmp_path / 'results.db'}"))
    assert "file is not a database" in msg and "move it away" in msg


def _full_database_saves_nothing_half(store) -> None:
    """`store` holds result "a" of run "r" and cannot grow: saving a big "b" is one line, and "a" stays alone."""
    big = make("r", "b")
    big.environment["log"] = "x" * 200_000
    msg = _one_line_store_error(lambda: store.save(big))
    assert "database or disk is full" in msg and "free some space" in msg
    assert [r.combo_key for r in store.results_for("r")] == ["a"]  # nothing half-written


def test_a_full_database_is_a_one_line_store_error(tmp_path):
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'results.db'}")
    store.save(make("r", "a"))
    with store.engine.connect() as c:
        pages = c.exec_driver_sql("PRAGMA page_count").scalar()
    store.engine.dispose()
    # SQLite's own size limit: the same SQLITE_FULL a full disk gives, on this store's connections
    store.sa.event.listen(store.engine, "connect",
                          lambda conn, _: conn.execute(f"PRAGMA max_page_count = {pages}"))
    _full_database_saves_nothing_half(store)


# ------------------------------------------------------------------ working directory
def test_a_relative_sqlite_url_stays_on_its_file_when_the_working_directory_changes(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    store = SqlAlchemyStore("sqlite:///results.db")
    uri = SqlAlchemyStore("sqlite:///file:results.db?uri=true")  # a SQLite URI filename is made absolute too
    monkeypatch.chdir(tmp_path / "b")
    store.engine.dispose()  # new connections after the chdir
    store.save(make("r", "a"))
    assert (tmp_path / "a" / "results.db").exists() and not (tmp_path / "b" / "results.db").exists()
    assert str(tmp_path / "a" / "results.db") in store.url
    uri.engine.dispose()
    assert [r.combo_key for r in uri.results_for("r")] == ["a"]


# ------------------------------------------------------------------ the default store without SQLAlchemy
def test_the_default_sqlite_store_never_imports_sqlalchemy(tmp_path):
    code = ("import sys; from deploytool.store import open_store\n"
            f"s = open_store(None, 'sqlite:///{tmp_path / 'results.db'}')\n"
            "s.start_run('r', 'm', {}); s.finish_run('r')\n"
            "print(type(s).__name__, s.get_run('r').status, 'sqlalchemy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["SqliteStore", "complete", "False"]


@pytest.mark.parametrize("url, kept", [
    ("sqlite:///r.db", True), ("sqlite:///file:r.db?mode=ro&uri=true", True),
    ("sqlite://", False), ("sqlite:///:memory:", False), ("sqlite+pysqlite:///r.db", False),
    ("sqlite:///r.db?timeout=5", False), ("sqlite:///a%20b.db", False), ("postgresql+psycopg://u@h/db", False),
])
def test_open_store_takes_plain_sqlite_files_itself_and_leaves_the_rest_to_sqlalchemy(tmp_path, monkeypatch, url, kept):
    monkeypatch.chdir(tmp_path)
    assert (sqlite_target(url) is not None) == kept
    if kept and "mode=ro" not in url:
        assert type(open_store(url, "unused")) is SqliteStore
    assert sqlite_target("sqlite:///file:r.db?mode=ro&uri=true") == (f"file:{tmp_path / 'r.db'}?mode=ro", True)


def _schema(db: Path) -> list[tuple]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as c:
        return sorted(c.execute("select type, name, tbl_name, sql from sqlite_master").fetchall(), key=str)


def test_both_stores_make_the_same_tables_and_read_each_others_files(tmp_path):
    """SqliteStore's tables are SQLAlchemy's, to the DDL text: a column added to rows.TABLES shows in both."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    light, full = SqliteStore(f"sqlite:///{a}"), SqlAlchemyStore(f"sqlite:///{b}")
    assert _schema(a) == _schema(b) and len(_schema(a)) == 10
    for writer, reader in ((light, SqlAlchemyStore(f"sqlite:///{a}")), (full, SqliteStore(f"sqlite:///{b}"))):
        writer.start_run("r1", "m", {"targets": ["host"], "n": 1.5, "none": None})
        writer.save(make("r1", "a"))
        writer.save(_nan_result())
        writer.save_point("r1", "sweep", "p1", {"x": [1, 2], "y": None})
        writer.record_finding("f1", {"stage": "load"}, "owner", "title", "r1", {"numpy": "1"}, "row", "bundle")
        writer.mark_finding_absent("f1", "r2", {"numpy": "2"})
        for store in (writer, reader):
            run = store.get_run("r1")
            assert run is not None and run.request == {"targets": ["host"], "n": 1.5, "none": None}
            (row,) = store.results_for("r1")
            assert row.to_json() == writer.results_for("r1")[0].to_json() and row.metrics["accuracy"] == 0.9
            assert row.metrics["max_abs_error"] is None and row.notes == ["n"] and row.artifact == factory.artifact()
            assert store.results_for("r")[0].to_json() == writer.results_for("r")[0].to_json()
            assert store.points("r1") == {"p1": {"x": [1, 2], "y": None}}
            (f,) = store.findings()
            assert f.runs == ("r1",) and f.versions == {"numpy": ("1",)} and f.not_seen_since == "numpy 2"
            assert store.final_keys("r1") == {"a"} and store.history("m", ["a"], "r9")["a"].run_id == "r1"


def test_both_stores_answer_every_call_of_the_result_store_protocol():
    """Siblings, not parent and child: each store implements the whole ResultStore, call for call."""
    import inspect

    from deploytool.store import ResultStore

    calls = [n for n, v in vars(ResultStore).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert "get_finding" in calls and "record_finding" in calls and "list_runs" in calls
    for cls in (SqlAlchemyStore, SqliteStore):
        assert cls.__bases__ == (object,)
        for n in calls:
            assert inspect.signature(getattr(cls, n)) == inspect.signature(getattr(ResultStore, n)), (cls, n)


def test_a_full_database_is_a_one_line_store_error_without_sqlalchemy(tmp_path, monkeypatch):
    store = SqliteStore(f"sqlite:///{tmp_path / 'results.db'}")
    store.save(make("r", "a"))
    (pages,) = raw_row(tmp_path / "results.db", "PRAGMA page_count")
    connect = store._connect

    def at_its_size_limit():  # SQLite's own size limit: the same SQLITE_FULL a full disk gives
        c = connect()
        c.execute(f"PRAGMA max_page_count = {pages}")
        return c

    monkeypatch.setattr(store, "_connect", at_its_size_limit)
    _full_database_saves_nothing_half(store)


def test_a_relative_sqlite_file_stays_put_without_sqlalchemy(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    store, uri = SqliteStore("sqlite:///results.db"), SqliteStore("sqlite:///file:results.db?uri=true")
    monkeypatch.chdir(tmp_path / "b")
    store.save(make("r", "a"))
    assert (tmp_path / "a" / "results.db").exists() and not (tmp_path / "b" / "results.db").exists()
    assert store.url == f"sqlite:///{tmp_path / 'a' / 'results.db'}"
    assert [r.combo_key for r in uri.results_for("r")] == ["a"]
