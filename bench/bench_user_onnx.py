"""Benchmark (issue 10, lean user-model path): a user's ONNX model with its
own test .npz on the host, against a bare onnxruntime script doing the same
job (accuracy in batches, then batch-1 latency of every sample). Prints, per
code tree given (e.g. main and a branch, run interleaved):

- wall time of `migrate --fresh` with the baseline cached, and its ratio to the floor (target <= 1.5x, issue 37);
- fixed cost: `migrate --fresh` on 1 sample, minus the interpreter's own start (target <= 0.5 s);
- peak RSS of a first migrate at --samples (default 8,000), and its ratio to the floor's (target <= 1.5x).

Beside each wall time: the CPU seconds (user + sys, the process and its workers) of the same runs, which a
busy machine inflates far less, and the 1-minute load average before and after.

    .venv/bin/python bench/bench_user_onnx.py [--code DIR ...] [--samples 8000] [--repeats 3]

Run it with bytecode caching on (unset PYTHONDONTWRITEBYTECODE; PYTHONPYCACHEPREFIX keeps the caches out of
the trees), as a user's install has it: otherwise every run recompiles deploytool's sources.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLOOR = """
import sys, time, numpy as np, onnxruntime as ort
z = np.load(sys.argv[2]); x = z["x"].astype(np.float32) / 255; y = z["y"]
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"]); name = s.get_inputs()[0].name
out = np.concatenate([s.run(None, {name: x[i:i + 256]})[0] for i in range(0, len(x), 256)])
lat = []
for i in range(len(x)):
    t = time.perf_counter(); s.run(None, {name: x[i:i + 1]}); lat.append(time.perf_counter() - t)
print((out.argmax(1) == y).mean(), np.median(lat))
"""


CPU: dict[str, list[float]] = {}  # what `run` measured: CPU seconds of each timed command, by its label


def run(args: list[str], cwd: Path, label: str = "") -> tuple[float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(cwd)})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{args} failed: {r.stderr[-2000:]}")
    if label:
        CPU.setdefault(label, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, r


def peak_rss_kib(args: list[str], cwd: Path) -> int:
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *args], cwd=cwd, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(cwd)})
    return int(out.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", type=Path, action="append", help="a deploytool tree to measure (default: this one)")
    ap.add_argument("--samples", type=int, default=8000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    codes = args.code or [ROOT]
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from tests.integration.test_usermodel import onnx_model

    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = onnx_model(tmp / "lenet_like.onnx", [None, 28, 28, 1])
        rng = np.random.default_rng(0)
        for n in (1, 2000, args.samples):
            np.savez(tmp / f"x{n}.npz", x=rng.integers(0, 255, (n, 28, 28, 1)).astype(np.uint8),
                     y=rng.integers(0, 10, n))
        (tmp / "floor.py").write_text(FLOOR)

        def migrate(code: Path, n: int, ws: str, fresh: bool = True) -> list[str]:
            return [py, "-m", "deploytool", "migrate", "--model", str(model), "--data", str(tmp / f"x{n}.npz"),
                    "--scale", str(1 / 255), "--target", "host", "--format", "onnx", "--quantize", "none",
                    "--workspace", str(tmp / ws), "--quiet"] + (["--fresh"] if fresh else [])

        for code in codes:  # fill each tree's caches (baseline) once, untimed
            for n in (1, 2000):
                run(migrate(code, n, f"ws-{codes.index(code)}", fresh=False), code)
        walls: dict[str, list[float]] = {}
        load_before = os.getloadavg()[0]
        for _ in range(args.repeats):
            walls.setdefault("interpreter", []).append(run([py, "-c", "pass"], ROOT, "interpreter")[0])
            walls.setdefault("floor", []).append(run([py, str(tmp / "floor.py"), str(model), str(tmp / "x2000.npz")],
                                                     ROOT, "floor")[0])
            for i, code in enumerate(codes):
                walls.setdefault(f"{code} 2000", []).append(run(migrate(code, 2000, f"ws-{i}"), code, f"{code} 2000")[0])
                walls.setdefault(f"{code} 1", []).append(run(migrate(code, 1, f"ws-{i}"), code, f"{code} 1")[0])
        med = {k: statistics.median(v) for k, v in walls.items()}
        cpu = {k: statistics.median(v) for k, v in CPU.items()}
        print(f"1-minute load average {load_before:.1f} before the timed runs, {os.getloadavg()[0]:.1f} after")
        floor_rss = peak_rss_kib([py, str(tmp / "floor.py"), str(model), str(tmp / f"x{args.samples}.npz")], ROOT)
        print(f"interpreter start {med['interpreter']:.2f} s (CPU {cpu['interpreter']:.2f} s); floor script at 2,000 "
              f"samples {med['floor']:.3f} s (CPU {cpu['floor']:.2f} s); "
              f"floor peak RSS at {args.samples:,} samples {floor_rss / 1024:.0f} MiB")
        for i, code in enumerate(codes):
            rss = peak_rss_kib(migrate(code, args.samples, f"rss-{i}", fresh=False), code)
            print(f"{code}: migrate --fresh at 2,000 samples {med[f'{code} 2000']:.3f} s "
                  f"({med[f'{code} 2000'] / med['floor']:.2f}x the floor; CPU {cpu[f'{code} 2000']:.2f} s, "
                  f"{cpu[f'{code} 2000'] / cpu['floor']:.2f}x the floor's); fixed cost "
                  f"{med[f'{code} 1'] - med['interpreter']:.2f} s beyond interpreter start (CPU "
                  f"{cpu[f'{code} 1'] - cpu['interpreter']:.2f} s); peak RSS at "
                  f"{args.samples:,} samples {rss / 1024:.0f} MiB ({rss / floor_rss:.2f}x the floor)")


if __name__ == "__main__":
    main()
