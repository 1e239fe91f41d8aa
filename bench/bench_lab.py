"""Benchmark (issue 11): what the lab's engine costs on top of the cells it runs,
on the embedded LocalCluster that `deploytool lab run` starts with no flags.

(a) Dispatch overhead per cell: N near-no-op cells (each records its own time)
    submitted as the driver submits them (resource `host`, retries=1, one at a time
    on the worker); (wall time - sum of cell times) / N. Target: under 50 ms.
(b) A 200-cell night through the driver's own loop (`night._run_cells`: submit,
    as_completed, each result stored in SQLite as it arrives) with a test-double cell
    (named as one: it sleeps a seeded 20-80 ms instead of running a model and
    returns a stored-size row): wall time against the sum of cell times.

    .venv/bin/python bench/bench_lab.py [--cells 200] [--noop 100]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MS = 50.0


def noop_cell(i: int) -> float:
    """Its own seconds (Dask pickles __main__'s functions by value: a time is returned, not kept in a global)."""
    t = time.perf_counter()
    return time.perf_counter() - t


def double_cell(payload: dict) -> dict:
    """A test double of deploytool.lab.cell.run_cell: sleeps instead of measuring, returns a row."""
    import random

    from deploytool.result import Combo, Result, Status

    t = time.perf_counter()
    time.sleep(random.Random(payload["cell"]).uniform(0.02, 0.08))
    r = Result(run_id=payload["run_id"], combo_key=payload["cell"], model="lenet5", dataset="mnist",
               combo=Combo(**payload["combo"]), status=Status.RUNTIME_FAILED, reason="bench double",
               environment={"lab_cell": payload["cell"], "lab_host": "bench", "lab_worker": "embedded"})
    r.environment["bench_cell_s"] = time.perf_counter() - t
    return r.to_json()


def dispatch_overhead(n: int) -> tuple[float, float]:
    from distributed import as_completed

    from deploytool.lab import engine

    with engine.client(None, {"host": 1}) as c:
        c.submit(noop_cell, -1, resources={"host": 1}, pure=False).result()  # warm: first task, imports
        t = time.perf_counter()
        futures = [c.submit(noop_cell, i, resources={"host": 1}, retries=1, pure=False, key=f"noop-{i}")
                   for i in range(n)]
        busy = sum(f.result() for f in as_completed(futures))
        wall = time.perf_counter() - t
    return wall, busy


def night_of_doubles(n: int, tmp: Path) -> tuple[float, float]:
    from deploytool.lab import cell as cell_module
    from deploytool.lab import engine, night
    from deploytool.result import Combo
    from deploytool.store import SqlAlchemyStore
    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp / "ws")
    store = SqlAlchemyStore(f"sqlite:///{tmp / 'lab.db'}")
    store.start_run("lab-bench-n1", "lab:bench", {"kind": "lab", "night": "n1", "cells": n})
    combo = Combo("keras", "tflite", "none", "host", runtime="lab-double")
    cells = [night.Cell(f"c{i:04d}", f"cell {i}", {}, combo, "host", "lenet5") for i in range(n)]
    real = cell_module.run_cell
    cell_module.run_cell = double_cell  # _run_cells imports it when called
    try:
        with engine.client(None, {"host": 1}) as c:
            t = time.perf_counter()
            night._run_cells(c, cells, ws, store, "lab-bench-n1", __import__("distributed").as_completed, False)
            wall = time.perf_counter() - t
    finally:
        cell_module.run_cell = real
    stored = store.results_for("lab-bench-n1")
    assert len(stored) == n
    return wall, sum(float(r.environment["bench_cell_s"]) for r in stored)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--noop", type=int, default=100)
    args = ap.parse_args()
    wall, busy = dispatch_overhead(args.noop)
    per_ms = 1000 * (wall - busy) / args.noop
    print(f"(a) {args.noop} near-no-op cells on LocalCluster: wall {wall:.3f} s, cells {busy * 1000:.2f} ms in all; "
          f"dispatch overhead {per_ms:.2f} ms per cell, {per_ms / TARGET_MS:.3f} of the {TARGET_MS:.0f} ms target")
    with tempfile.TemporaryDirectory() as tmp:
        wall, busy = night_of_doubles(args.cells, Path(tmp))
    print(f"(b) a {args.cells}-cell night of test-double cells (driver loop, SQLite store): wall {wall:.2f} s, "
          f"sum of cell times {busy:.2f} s, ratio {wall / busy:.3f}; "
          f"overhead {1000 * (wall - busy) / args.cells:.1f} ms per cell")


if __name__ == "__main__":
    main()
