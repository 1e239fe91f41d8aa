"""The results store against a real PostgreSQL server (Debian `postgresql`),
started here on a free loopback port in a temporary cluster and stopped at the
end. Missing PostgreSQL binaries fail loudly: `make setup` installs them."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from deploytool.errors import StoreError
from deploytool.result import Combo, Result, Status
from deploytool.store import SqlAlchemyStore
from tests import results as factory
from tests.conftest import run_cli
from tests.store_hammer import check_last_write_wins, hammer

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _cluster():
    """A PostgreSQL server in a fresh temporary cluster on a free loopback port; yields (url, stop)."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert bins, "PostgreSQL server binaries are missing: run `make setup` (Debian package postgresql)"
    bindir = Path(bins[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="deploytool-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    data = root / "data"
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "deploytool"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60",
                    "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1", "start"],
                   check=True, capture_output=True, timeout=120)

    def stop() -> None:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)

    try:
        yield f"postgresql+psycopg://deploytool@127.0.0.1:{port}/postgres", stop
    finally:
        stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_url():
    with _cluster() as (url, _):
        yield url


def result(run_id: str, key: str, status: str = "measured", acc: float = 0.9) -> Result:
    combo = Combo("torch", "onnx", "int8", "host")
    if status != "measured":
        return factory.result(run_id, key, status, combo=combo, reason="adb: device offline", notes=["x"])
    return factory.result(run_id, key, combo=combo, notes=["x"],
                          comparison=factory.comparison(accuracy=acc, max_abs_error=float("nan"), flipped=(3,)),
                          measurement=factory.measurement(p50_ms=0.5))


def test_store_roundtrip_resume_and_history_on_postgres(pg_url):
    s = SqlAlchemyStore(pg_url)
    s.start_run("pg1", "m", {"targets": ["host"], "weird": float("inf")})
    s.save(result("pg1", "a"))
    s.save(result("pg1", "b", status="device_lost"))
    assert s.final_keys("pg1") == {"a"}
    s.save(result("pg1", "b", acc=0.7))
    rows = s.results_for("pg1")
    assert [r.combo_key for r in rows] == ["a", "b"] and rows[1].metrics["accuracy"] == 0.7
    assert rows[0].comparison is not None
    assert rows[0].comparison.flipped[0].index == 3 and rows[0].metrics["max_abs_error"] is None
    s.finish_run("pg1")
    s.start_run("pg2", "m", {})
    assert s.history("m", ["a"], before_run="pg2")["a"].run_id == "pg1"
    # a second host (a second engine) sees the same results
    assert {r.run_id for r in SqlAlchemyStore(pg_url).list_runs()} == {"pg1", "pg2"}


def test_migrate_writes_to_postgres_and_report_reads_it(pg_url, lenet5_workspace):
    ws, *_ = lenet5_workspace
    r = run_cli("migrate", "--model", "lenet5", "--framework", "keras", "--format", "tflite", "--quantize", "none",
                "--workspace", str(ws.root), "--db", pg_url, "--run-id", "pg-run", "--quiet", "--latency-samples", "5")
    assert r.returncode == 0, r.stderr
    rows = SqlAlchemyStore(pg_url).results_for("pg-run")
    assert len(rows) == 1 and rows[0].status == "measured" and rows[0].metrics["agreement"] == 1.0
    r = run_cli("report", "--list", "--workspace", str(ws.root), env={"DEPLOYTOOL_DB": pg_url})
    assert r.returncode == 0 and "pg-run" in r.stdout
    r = run_cli("report", "pg-run", "--workspace", str(ws.root), "--db", pg_url)
    assert r.returncode == 0 and "report:" in r.stdout


def test_unreachable_database_is_one_line(tmp_path):
    r = run_cli("report", "--list", "--db", f"postgresql+psycopg://nobody@127.0.0.1:{_free_port()}/x",
                "--workspace", str(tmp_path))
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "cannot open the results database" in lines[0]


def _fresh_database(pg_url: str, name: str) -> str:
    """A new empty database on the test server; returns its URL."""
    import sqlalchemy as sa

    eng = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    eng.dispose()
    return pg_url.rsplit("/", 1)[0] + f"/{name}"


def test_concurrent_first_runs_and_saves_on_postgres(pg_url):
    url = _fresh_database(pg_url, "hammer")  # every writer creates the schema at the same moment
    lasts = hammer(url, writers=4, n_keys=10, n_saves=100)  # 400 saves, colliding on 10 keys
    check_last_write_wins(SqlAlchemyStore(url), lasts, n_keys=10)


def test_long_run_ids_and_names_fit_and_an_old_narrow_schema_is_widened(pg_url):
    url = _fresh_database(pg_url, "narrow")
    s = SqlAlchemyStore(url)
    with s.engine.begin() as c:  # the columns as deploytool created them before they were widened
        for table, col in (("runs", "run_id"), ("results", "run_id"), ("results", "combo_key")):
            c.execute(s.sa.text(f"ALTER TABLE {table} ALTER COLUMN {col} TYPE varchar(64)"))
    s.engine.dispose()
    run_id, model = "r" * 100, "m" * 100  # the longest the CLI accepts
    long = Result(run_id=run_id, combo_key="k" * 100, model=model, dataset="d" * 100,
                  combo=Combo("torch", "onnx", "int8", "android", device="s" * 100, backend="nnapi"), status=Status.MEASURED)
    s = SqlAlchemyStore(url)
    s.start_run(run_id, model, {})
    s.save(long)
    stored = s.get_run(run_id)
    assert [r.combo_key for r in s.results_for(run_id)] == ["k" * 100] and stored is not None and stored.model == model


def test_a_value_too_long_for_its_column_is_a_one_line_store_error(pg_url):
    s = SqlAlchemyStore(pg_url)
    with pytest.raises(StoreError) as e:
        s.start_run("x" * 300, "m", {})
    msg = str(e.value)
    assert "\n" not in msg and "too long" in msg and pg_url.split("@")[1] in msg


def test_a_database_that_does_not_exist_on_the_server_is_a_one_line_store_error(pg_url):
    with pytest.raises(StoreError) as e:
        SqlAlchemyStore(pg_url.rsplit("/", 1)[0] + "/no_such_db")
    msg = str(e.value)
    assert "\n" not in msg and 'database "no_such_db" does not exist' in msg and "create the database" in msg


def test_a_database_server_that_goes_away_is_a_one_line_store_error():
    with _cluster() as (url, stop):
        s = SqlAlchemyStore(url)
        s.start_run("gone", "m", {})
        s.save(result("gone", "a"))
        with s.engine.connect() as c:  # a server restart drops every pooled connection ...
            c.execute(s.sa.text("select pg_terminate_backend(pid) from pg_stat_activity "
                                "where pid <> pg_backend_pid() and datname = current_database()"))
        s.save(result("gone", "b"))  # ... which the store survives: it checks a connection before use
        stop()
        for call in (lambda: s.save(result("gone", "c")), lambda: s.results_for("gone"), s.list_runs,
                     lambda: s.finish_run("gone")):
            with pytest.raises(StoreError) as e:
                call()
            msg = str(e.value)
            assert "\n" not in msg and url.split("@")[1] in msg and "server is running" in msg
