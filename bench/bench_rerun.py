"""Benchmark (issue 10, "no needless work"): a re-run of a finished run, one of
whose rows is a browser row that fails deterministically (the page cannot load
the model), against `deploytool report RUN` of the same run. Both are timed
from outside, interleaved, as a user would see them. Target: ratio <= 1.2.

    .venv/bin/python bench/bench_rerun.py [--repeats 5]

The model is a user's dynamic-range .tflite (LiteRT on the host runs it,
tfjs-tflite in Chromium refuses it); the first migrate fills the workspace and
is not timed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "deploytool", *args], capture_output=True, text=True, cwd=ROOT)
    return time.perf_counter() - t, r


def main() -> None:
    from tests.integration.test_rerun import user_inputs

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model, data = user_inputs(Path(tmp) / "in", n=2000)
        ws = str(Path(tmp) / "ws")
        migrate = ["migrate", "--model", str(model), "--data", str(data), "--scale", str(1 / 255),
                   "--target", "host,web", "--quantize", "none", "--workspace", ws, "--quiet"]
        _, first = timed(migrate)
        run_id = next(ln.split()[1].rstrip(":") for ln in first.stdout.splitlines() if ln.startswith("run "))
        assert "load_failed" in first.stdout, first.stdout + first.stderr
        rerun, report = [], []
        for _ in range(args.repeats):
            s, r = timed(migrate)
            assert r.returncode == 1 and "2 combinations, 1 failing" in r.stdout, r.stdout + r.stderr
            rerun.append(s)
            report.append(timed(["report", run_id, "--workspace", ws, "--quiet"])[0])
    m_rerun, m_report = statistics.median(rerun), statistics.median(report)
    print(f"re-run of a finished run (2 rows, 1 load_failed in Chromium): median {m_rerun:.2f} s "
          f"({', '.join(f'{s:.2f}' for s in rerun)})")
    print(f"deploytool report RUN: median {m_report:.2f} s ({', '.join(f'{s:.2f}' for s in report)})")
    print(f"ratio re-run / report: {m_rerun / m_report:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()
