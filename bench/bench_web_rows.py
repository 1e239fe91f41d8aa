"""Benchmark of issue 10, item 4 (one Chromium per run) and issue 25 part 3 (one
browser profile per run, so libraries are fetched and compiled once): seconds per web row of
the LeNet-5 web matrix (`migrate --model lenet5 --target web --format all
--quantize all --fresh`), with the code of another tree ("before", e.g. main,
where every row launches its own Chromium and writes its inputs to disk) and
with this tree ("after"), on the same workspace: training and conversions are
cached by a warm-up run first, so only the rows are timed. Also prints the
share of each tfjs wasm row's wall time spent moving tensors (target < 5 %),
the sum of the web rows' wall time, and each row's library load, model load
and first inference (the page's own timings), first row of each library
apart from the rows after it (those are the ones a shared cache speeds up),
with before/after ratios.

Run: .venv/bin/python bench/bench_web_rows.py --before /work/main [--rounds 2]
Writes bench/out/web_rows.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRANSFER_TARGET_SHARE = 0.05

# Runs inside the tree under test: one fresh migrate of the web matrix, its rows as JSON on the last line.
_ONE_RUN = r"""
import json, sys
from deploytool.migrate import MigrateRequest, migrate
req = MigrateRequest(model="lenet5", targets=("web",), formats=("all",), quantize=("all",), fresh=%(fresh)s)
out = migrate(req, sys.argv[1], progress=False, log=lambda s: None)
rows = []
for r in out.results:
    t = (r.environment or {}).get("timings_ms", {})
    rows.append({"row": r.combo.label, "status": str(r.status), "runtime_s": r.times.runtime,
                 "backend": r.combo.backend, "format": r.combo.format, "timings_ms": t,
                 "first_inference_ms": (r.metrics or {}).get("first_inference_ms")})
print(json.dumps({"seconds_total": out.seconds_total, "seconds_in_runtimes": out.seconds_in_runtimes,
                  "rows": rows}))
"""


def run_tree(tree: Path, workspace: Path, fresh: bool = True) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree),
           "DEPLOYTOOL_WEB_HARNESS": os.environ.get("DEPLOYTOOL_WEB_HARNESS", str(tree / "web_harness"))}
    proc = subprocess.run([sys.executable, "-c", _ONE_RUN % {"fresh": fresh}, str(workspace)], cwd=tree, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: migrate failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def transfer_share(row: dict) -> float | None:
    t = row["timings_ms"]
    if not t or not row["runtime_s"]:
        return None
    moved_ms = sum(float(t.get(k, 0.0)) for k in ("inputs_write", "inputs_fetch", "results_post", "results_collect"))
    return moved_ms / 1e3 / row["runtime_s"]


def summary(name: str, run: dict) -> dict:
    rows = [r for r in run["rows"] if r["runtime_s"]]
    per_row = sum(r["runtime_s"] for r in rows) / len(rows)
    # what a row costs beyond the inference in the page: launch, page, library, model load, transfer, close
    overhead = sum(r["runtime_s"] - float(r["timings_ms"].get("inference", 0.0)) / 1e3 for r in rows) / len(rows)
    wasm = [s for r in rows if r["format"] == "tfjs" and r["backend"] == "wasm" and r["status"] == "measured"
            for s in [transfer_share(r)] if s is not None]
    print(f"  {name:<7} {len(rows)} rows, {per_row:.2f} s per web row, {overhead:.2f} s of it outside inference "
          f"(in runtimes {run['seconds_in_runtimes']:.1f} s, "
          f"run {run['seconds_total']:.1f} s); tfjs wasm transfer share "
          + (", ".join(f"{100 * s:.1f} %" for s in wasm) or "-"), flush=True)
    loads = load_summary(rows)
    print(f"          web rows' wall time {loads['web_rows_s']:.1f} s; per row (ms, mean): "
          + ", ".join(f"{k} {v:.0f}" for k, v in loads["mean_ms"].items())
          + "; rows after their library's first: "
          + ", ".join(f"{k} {v:.0f}" for k, v in loads["later_mean_ms"].items()), flush=True)
    return {"rows": len(rows), "seconds_per_row": per_row, "overhead_s_per_row": overhead,
            "tfjs_wasm_transfer_share": wasm, "loads": loads, "run": run}


LOAD_KEYS = {"library": "library_load", "model": "model_load", "page_open": "page_open", "load_total": "load_total"}


def load_summary(rows: list[dict]) -> dict:
    """Mean library load, model load, page open, whole load and first inference over the rows that loaded, and
    the same over the rows whose library an earlier row of the run had already loaded."""
    seen: set[str] = set()
    every: dict[str, list[float]] = {}
    later: dict[str, list[float]] = {}
    for r in rows:
        t = r["timings_ms"]
        if not t or "library_load" not in t:
            continue
        lib = f"{r['format']}/{r['backend']}"
        values = {k: float(t.get(key, 0.0)) for k, key in LOAD_KEYS.items()}
        if r.get("first_inference_ms") is not None:
            values["first_inference"] = float(r["first_inference_ms"])
        for k, v in values.items():
            every.setdefault(k, []).append(v)
            if lib in seen:
                later.setdefault(k, []).append(v)
        seen.add(lib)
    mean = lambda d: {k: sum(v) / len(v) for k, v in d.items() if v}
    return {"web_rows_s": sum(r["runtime_s"] or 0.0 for r in rows), "mean_ms": mean(every),
            "later_mean_ms": mean(later)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the tree to compare with (e.g. /work/main)")
    ap.add_argument("--workspace", type=Path, default=None, help="default: a new temporary one")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved before/after pairs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "web_rows.json")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-web-rows-") as tmp:
        ws = args.workspace or Path(tmp)
        print(f"warm-up (training, conversions, baselines) in {ws} ...", flush=True)
        run_tree(ROOT, ws, fresh=False)
        results: dict[str, list[dict]] = {"before": [], "after": []}
        for i in range(args.rounds):
            print(f"round {i + 1}:", flush=True)
            results["before"].append(summary("before", run_tree(args.before.resolve(), ws)))
            results["after"].append(summary("after", run_tree(ROOT, ws)))
    before = min(r["seconds_per_row"] for r in results["before"])
    after = min(r["seconds_per_row"] for r in results["after"])
    overhead_before = min(r["overhead_s_per_row"] for r in results["before"])
    overhead_after = min(r["overhead_s_per_row"] for r in results["after"])
    shares = [s for r in results["after"] for s in r["tfjs_wasm_transfer_share"]]
    worst = max(shares) if shares else float("nan")
    print(f"seconds per web row: before {before:.2f} s, after {after:.2f} s, ratio {before / after:.2f}x; "
          f"outside inference: before {overhead_before:.2f} s, after {overhead_after:.2f} s, "
          f"ratio {overhead_before / overhead_after:.2f}x; tfjs wasm transfer share after: max {100 * worst:.1f} % (target < {100 * TRANSFER_TARGET_SHARE:g} %)")
    b_loads = min((r["loads"] for r in results["before"]), key=lambda x: x["web_rows_s"])
    a_loads = min((r["loads"] for r in results["after"]), key=lambda x: x["web_rows_s"])
    print(f"web rows' wall time: before {b_loads['web_rows_s']:.1f} s, after {a_loads['web_rows_s']:.1f} s, "
          f"ratio {b_loads['web_rows_s'] / a_loads['web_rows_s']:.2f}x")
    for scope in ("mean_ms", "later_mean_ms"):
        print(f"  {'every row' if scope == 'mean_ms' else 'rows after the first of their library'} (ms): "
              + "; ".join(f"{k} {b_loads[scope][k]:.0f} -> {a_loads[scope].get(k, float('nan')):.0f} "
                          f"({b_loads[scope][k] / a_loads[scope][k]:.2f}x)"
                          for k in b_loads[scope] if a_loads[scope].get(k)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"before_s_per_row": before, "after_s_per_row": after, "ratio": before / after,
                                    "before_overhead_s_per_row": overhead_before,
                                    "after_overhead_s_per_row": overhead_after,
                                    "tfjs_wasm_transfer_share_max": worst,
                                    "web_rows_s": {"before": b_loads["web_rows_s"], "after": a_loads["web_rows_s"]},
                                    "loads_ms": {"before": b_loads, "after": a_loads}, "rounds": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
