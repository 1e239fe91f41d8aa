"""Benchmark (issue 10, "latency that repeats"): how much this machine's own speed
moves while nothing changes. One LiteRT interpreter runs LeNet-5's float TFLite
file at batch 1, one thread, timed as deploytool times a short row (K inferences
per timer reading); each process times back-to-back windows of about 0.2 s and
reports each window's median. Several fresh processes run one after another.

    .venv/bin/python bench/bench_machine_drift.py [--workspace DIR] [--processes 6] [--windows 5]

No deploytool measurement code is in the loop beyond `time_batch1`: what moves
here moves under every row. Compare the spread with bench_repeat.py's: two runs
of a row cannot agree more closely than the machine agrees with itself.
`--workspace` reuses one where LeNet-5 was migrated to TFLite on the host
(default: a new temporary one, which trains it first, ~30 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WINDOW_READINGS = 200  # readings of K inferences (about 1 ms each): one window is about 0.2 s


def _model(workspace: str) -> Path:
    for meta in sorted(Path(workspace, "artifacts").glob("*/artifact.json")):
        art = json.loads(meta.read_text())
        if art.get("format") == "tflite" and art.get("quantize") == "none" and art.get("framework") == "keras":
            return meta.parent / Path(art["path"]).name
    args = [sys.executable, "-m", "deploytool", "migrate", "--model", "lenet5", "--framework", "keras",
            "--target", "host", "--format", "tflite", "--quantize", "none", "--workspace", workspace, "--quiet"]
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0, 1):
        sys.exit(f"migrate failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return _model(workspace)


def windows(model: str, count: int) -> list[float]:
    """In a fresh process: the median batch-1 latency (µs) of `count` consecutive windows."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    import deploytool.runtimes.measure as measure

    it = Interpreter(model_path=model, num_threads=1)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    x = np.random.default_rng(0).random((2000, *inp["shape"][1:]), dtype=np.float32)

    def predict(v):
        it.set_tensor(inp["index"], v)
        it.invoke()
        return it.get_tensor(out["index"])

    measure.MIN_READINGS = WINDOW_READINGS
    result = []
    for _ in range(count):
        lat, _, _ = measure.time_batch1(predict, x, 10, None)
        result.append(float(np.median(lat)) * 1e3)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", default=None)
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "WINDOWS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(windows(args.child[0], int(args.child[1]))))
        return
    workspace = args.workspace or tempfile.mkdtemp(prefix="bench-drift-")
    model = _model(workspace)
    per_process = []
    for _ in range(args.processes):
        r = subprocess.run([sys.executable, __file__, "--child", str(model), str(args.windows)],
                           capture_output=True, text=True, check=True)
        per_process.append(json.loads(r.stdout.strip().splitlines()[-1]))
    print("LiteRT, LeNet-5 float TFLite, 1 thread, batch 1: median µs of each ~0.2 s window")
    for i, ws in enumerate(per_process):
        print(f"process {i + 1}: " + "  ".join(f"{w:5.1f}" for w in ws)
              + f"   (max/min within: {max(ws) / min(ws):.2f})")
    flat = [w for ws in per_process for w in ws]
    first = [ws[0] for ws in per_process]
    within = max(max(ws) / min(ws) for ws in per_process)
    pairs = [(a, b) for ws in per_process for a, b in zip(ws, ws[1:])]
    off = sum(abs(b / a - 1) > 0.10 for a, b in pairs)
    print(f"all windows: {min(flat):.1f}-{max(flat):.1f} µs (max/min {max(flat) / min(flat):.2f}); "
          f"first window of each process: max/min {max(first) / min(first):.2f}; "
          f"worst within one process: {within:.2f}")
    print(f"consecutive windows of one process more than 10% apart: {off} of {len(pairs)}")


if __name__ == "__main__":
    main()
