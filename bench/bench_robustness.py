"""Benchmark of issue 13 ("the robustness study over host and web, all formats, both twins, 500 samples, in
under 10 minutes on 2 cores"): the wall time of

    deploytool study robustness --model lenet5 --target host,web --format all --samples 500

(default attacks, ε grid and quantizations) in a fresh workspace, split into crafting, waiting for conversions,
the host rows' and the web rows' runtime calls, and the rest (imports, PC baselines, browser, store, report),
with its ratio to the 10-minute target and the machine's load average beside it.

Cached: only the trained twins, copied from a warm workspace (`--workspace W`, default: a temporary one trained
first, untimed). Not cached: conversions, crafted sets, outputs, the results database.

Run: .venv/bin/python bench/bench_robustness.py [--workspace W] [--samples 500]
Writes bench/out/robustness.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET_S = 600.0


def warm_models(warm: Path) -> None:
    """Both LeNet-5 twins trained in `warm` (found in its cache when they already are)."""
    from deploytool.data import load_dataset
    from deploytool.spec import load_spec
    from deploytool.train import train
    from deploytool.workspace import Workspace

    ws = Workspace.open(warm)
    spec = load_spec("lenet5")
    ds = load_dataset(spec)
    for fw in ("keras", "torch"):
        train(spec, fw, ds, ws, progress=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, default=None, help="a warm workspace whose trained models are reused")
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "robustness.json")
    args = ap.parse_args()

    from deploytool.cli import build_parser
    from deploytool.study.robustness import request_from_args, robustness

    with tempfile.TemporaryDirectory(prefix="bench-robustness-") as tmp:
        warm = args.workspace or Path(tmp) / "warm"
        t = time.perf_counter()
        warm_models(warm)
        print(f"trained twins in {warm} ({time.perf_counter() - t:.0f} s, not timed)", flush=True)
        fresh = Path(tmp) / "fresh"
        fresh.mkdir()
        shutil.copytree(warm / "models", fresh / "models")
        argv = ["study", "robustness", "--model", "lenet5", "--target", "host,web", "--format", "all",
                "--samples", str(args.samples), "--workspace", str(fresh), "--quiet"]
        req = request_from_args(build_parser().parse_args(argv))
        print("timing: deploytool " + " ".join(a for a in argv if a != str(fresh)), flush=True)
        load_before = os.getloadavg()
        t = time.perf_counter()
        out = robustness(req, fresh, progress=False, log=lambda s: None)
        wall = time.perf_counter() - t
        load_after = os.getloadavg()
    rows = out.seconds_in_runtimes
    split = {"crafting_s": out.seconds_crafting, "waiting_for_conversions_s": out.seconds_converting,
             **{f"rows_{target}_s": s for target, s in sorted(rows.items())}}
    rest = wall - sum(split.values())
    print(f"wall {wall:.0f} s for {out.rows_measured} (set, row) points, {out.sets_crafted} sets crafted; "
          + ", ".join(f"{k[:-2].replace('_', ' ')} {v:.0f} s" for k, v in split.items())
          + f", rest {rest:.0f} s (imports, PC baselines, browser, store, report)")
    print(f"ratio to the 10-minute target: {wall / TARGET_S:.2f} (target <= 1.00) on {os.cpu_count()} cores; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after (1 min), "
          f"{load_after[2]:.1f} (15 min)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"wall_s": wall, "target_s": TARGET_S, "ratio": wall / TARGET_S, **split,
                                    "rest_s": rest, "points": out.rows_measured, "sets_crafted": out.sets_crafted,
                                    "samples": args.samples, "cpus": os.cpu_count(),
                                    "load_before": load_before, "load_after": load_after}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
