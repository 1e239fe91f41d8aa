"""Benchmark (issue 10, "latency that repeats", "memory that means something"):
two identical `--fresh` runs of a small host matrix (LeNet-5, host, every
format, no quantization), then every row's p50 and memory figure of the second
run divided by the first's. Target: every p50 ratio within 10% of 1, every
memory ratio within 5%.

    .venv/bin/python bench/bench_repeat.py [--workspace DIR] [--code DIR] [--latency-samples N]

A first run fills the workspace (training, conversions, the baseline) and is
not compared. `--code` runs another checkout's deploytool (e.g. main, for the
numbers before a change); the rows are read with this checkout's store code.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def migrate(code: Path, ws: str, extra: list[str]) -> str:
    args = [sys.executable, "-m", "deploytool", "migrate", "--model", "lenet5", "--target", "host", "--format", "all",
            "--quantize", "none", "--workspace", ws, "--quiet", *extra]
    r = subprocess.run(args, capture_output=True, text=True, cwd=code)
    run_id = next((ln.split()[1].rstrip(":") for ln in r.stdout.splitlines() if ln.startswith("run ")), None)
    if run_id is None:
        sys.exit(f"migrate failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}")
    return run_id


def rows(ws: str, run_id: str) -> dict[str, tuple[str, float | None, str, float | None, int]]:
    """label -> (where, p50_ms, memory figure name, memory bytes, K) of a stored run."""
    from deploytool.run.stored import stored_results
    from deploytool.store import open_store
    from deploytool.workspace import Workspace

    w = Workspace.open(ws, writable=False)
    out = {}
    for r in stored_results(open_store(None, w.default_db_url), w, run_id):
        m = r.measurement
        if m is None:
            continue
        mem = m.memory or ("-", None)
        out[r.combo.label] = (r.combo.where, m.p50_ms, mem[0], mem[1],
                              int(r.environment.get("latency_inferences_per_reading") or 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default=None, help="a workspace to reuse (default: a new temporary one)")
    ap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose deploytool runs (default: this one)")
    ap.add_argument("--latency-samples", type=int, default=None)
    args = ap.parse_args()
    extra = ["--latency-samples", str(args.latency_samples)] if args.latency_samples else []
    with tempfile.TemporaryDirectory() as tmp:
        ws = args.workspace or str(Path(tmp) / "ws")
        migrate(args.code, ws, extra)  # fills the workspace; not compared
        a, b = (rows(ws, migrate(args.code, ws, ["--fresh", *extra])) for _ in range(2))
    worst_p50 = worst_mem = 0.0
    print(f"{'row':48} {'p50 µs 1':>9} {'p50 µs 2':>9} {'ratio':>6} {'K':>4}  {'memory MiB 1':>12} "
          f"{'memory MiB 2':>12} {'ratio':>6}  figure")
    for label in sorted(a.keys() & b.keys()):
        (_, p1, fig, m1, k), (_, p2, _, m2, _) = a[label], b[label]
        rp = p2 / p1 if p1 and p2 else float("nan")
        rm = m2 / m1 if m1 and m2 else float("nan")
        worst_p50 = max(worst_p50, abs(rp - 1))
        worst_mem = max(worst_mem, abs(rm - 1))
        mib = lambda v: f"{v / 2**20:12.2f}" if v is not None else f"{'-':>12}"
        print(f"{label[:48]:48} {1e3 * p1:9.1f} {1e3 * p2:9.1f} {rp:6.3f} {k:4d}  {mib(m1)} {mib(m2)} {rm:6.3f}  {fig}")
    print(f"worst p50 ratio off by {100 * worst_p50:.1f}% (target 10%), worst memory ratio off by "
          f"{100 * worst_mem:.1f}% (target 5%)")


if __name__ == "__main__":
    main()
