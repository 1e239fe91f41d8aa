import math

from deploytool.result import Combo, Result
from deploytool.store import Store


def make(run_id, key, status="measured", acc=0.9):
    return Result(run_id=run_id, combo_key=key, model="m", dataset="d", combo=Combo("keras", "tflite", "int8", "host"),
                  status=status, reason="" if status == "measured" else "boom", verdict="pass" if status == "measured" else None,
                  metrics={"accuracy": acc, "max_abs_error": float("inf"), "p50_ms": float("nan")},
                  details={"notes": ["n"], "comparison": {"flipped": [{"index": 1}]}})


def test_roundtrip_resume_and_history(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    store.start_run("r1", "m", {"targets": ["host"], "path": tmp_path})
    store.save(make("r1", "a"))
    store.save(make("r1", "b", status="runtime_failed"))
    store.save(make("r1", "c", status="conversion_failed"))
    assert store.final_keys("r1") == {"a", "c"}  # a runtime fault is retried on re-run
    store.save(make("r1", "b", acc=0.8))  # the retry replaces the row
    rows = store.results_for("r1")
    assert [r.combo_key for r in rows] == ["a", "c", "b"]
    b = rows[-1]
    assert b.metrics["accuracy"] == 0.8 and b.combo == Combo("keras", "tflite", "int8", "host")
    assert b.details["notes"] == ["n"] and b.metrics["max_abs_error"] == "inf"
    store.finish_run("r1")
    assert store.get_run("r1")["status"] == "complete" and store.get_run("r")["run_id"] == "r1"
    store.start_run("r2", "m", {})
    store.save(make("r2", "a", acc=0.5))
    hist = store.history("m", ["a", "b"], before_run="r2")
    assert hist["a"].metrics["accuracy"] == 0.9 and hist["a"].run_id == "r1"
    # a second Store on the same file sees everything (results survive the process)
    again = Store(f"sqlite:///{tmp_path / 'r.db'}")
    assert len(again.results_for("r1")) == 3 and {r["run_id"] for r in again.list_runs()} == {"r1", "r2"}


def test_metric_columns_hold_numbers_or_null(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    store.save(make("r", "a"))
    with store.engine.connect() as c:
        row = c.execute(store.sa.text("select accuracy, max_abs_error, p50_ms from results")).one()
    assert row[0] == 0.9 and row[1] is None and row[2] is None and not math.isnan(row[0])
