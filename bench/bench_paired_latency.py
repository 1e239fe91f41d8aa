"""Benchmark (issue 25, "the ratio is the measurement"): two identical `--fresh`
runs of LeNet-5 on the host (every format x every quantization), then every
row's latency ratio to the PC baseline (timed against it in alternating blocks)
of the second run divided by the first's, beside the same for the row's
absolute p50 (timed alone in its own worker, as before). Target: every ratio
within 10% between the runs, on a quiet machine and with a `nice -n 19`
CPU-bound job running beside both runs (`--burner`).

    .venv/bin/python bench/bench_paired_latency.py [--workspace DIR] [--burner] [--pairs 1]

A first run fills the workspace (training, conversions, baselines) and is not
compared. On a shared VM whatever else runs moves these numbers: the load
average is printed with each run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def migrate(ws: str, extra: list[str]) -> str:
    args = [sys.executable, "-m", "deploytool", "migrate", "--model", "lenet5", "--target", "host", "--format", "all",
            "--quantize", "all", "--workspace", ws, "--quiet", *extra]
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    run_id = next((ln.split()[1].rstrip(":") for ln in r.stdout.splitlines() if ln.startswith("run ")), None)
    if run_id is None:
        sys.exit(f"migrate failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}")
    return run_id


def rows(ws: str, run_id: str) -> dict[str, tuple]:
    """label -> (paired ratio, CI, p50 ms, drift, others' load during timing) of a stored run."""
    from deploytool.run.stored import stored_results
    from deploytool.store import open_store
    from deploytool.workspace import Workspace

    w = Workspace.open(ws, writable=False)
    out = {}
    for r in stored_results(open_store(None, w.default_db_url), w, run_id):
        m = r.measurement
        if m is None or m.paired is None:
            continue
        p = m.paired
        out[r.combo.label] = (p.ratio, (p.ratio_low, p.ratio_high), m.p50_ms, p.drift, p.others_busy_fraction)
    return out


def burner() -> subprocess.Popen:
    return subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])


def compare(ws: str, burn: bool) -> float:
    procs = [burner()] if burn else []
    try:
        runs = []
        for _ in range(2):
            load = os.getloadavg()[0]
            runs.append((rows(ws, migrate(ws, ["--fresh"])), load))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    (a, la), (b, lb) = runs
    print(f"\n{'with a nice -n 19 CPU burner beside' if burn else 'no burner'} (1-minute load average at the start "
          f"of each run: {la:.1f}, {lb:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'row':44} {'ratio 1':>8} {'CI 1':>15} {'ratio 2':>8} {'CI 2':>15} {'2/1':>6}   {'p50 2/1':>7} "
          f"{'drift':>9} {'others':>9}")
    worst_ratio = worst_p50 = 0.0
    for label in sorted(a.keys() & b.keys()):
        (r1, c1, p1, d1, o1), (r2, c2, p2, d2, o2) = a[label], b[label]
        rr, rp = r2 / r1, p2 / p1
        worst_ratio, worst_p50 = max(worst_ratio, abs(rr - 1)), max(worst_p50, abs(rp - 1))
        ci = lambda c: f"[{c[0]:.4f},{c[1]:.4f}]"
        pct = lambda o: f"{100 * o:3.0f}%" if o is not None else "  - "
        print(f"{label[:44]:44} {r1:8.4f} {ci(c1):>15} {r2:8.4f} {ci(c2):>15} {rr:6.3f}   {rp:7.3f} "
              f"{d1:4.1f},{d2:4.1f} {pct(o1)},{pct(o2)}")
    print(f"worst paired ratio off by {100 * worst_ratio:.1f}% between the runs (target 10%); worst absolute p50 off by "
          f"{100 * worst_p50:.1f}%")
    return worst_ratio


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default=None, help="a workspace to reuse (default: a new temporary one)")
    ap.add_argument("--burner", action="store_true", help="only the runs with a nice -n 19 CPU burner beside")
    ap.add_argument("--quiet-only", action="store_true", help="only the runs without a burner")
    ap.add_argument("--pairs", type=int, default=1, help="pairs of runs per condition")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = args.workspace or str(Path(tmp) / "ws")
        migrate(ws, [])  # fills the workspace; not compared
        for burn in ([True] if args.burner else [False] if args.quiet_only else [False, True]):
            worst = [compare(ws, burn) for _ in range(args.pairs)]
            print(f"=> {'burner' if burn else 'no burner'}: worst ratio difference per pair of runs: "
                  + ", ".join(f"{100 * w:.1f}%" for w in worst))


if __name__ == "__main__":
    main()
