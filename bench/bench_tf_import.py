"""Benchmark (issue 37, item 7): the CPU an import of TensorFlow costs a process of deploytool's (a runtime's or a
conversion's worker server, a CLI run: dozens in a `make test`), through proc.quiet.import_tensorflow, against a bare
`import tensorflow`. TensorFlow 2.19 and its Keras 3 import JAX, pandas and scikit-learn when they are installed,
for features deploytool does not use; import_tensorflow holds them back. Prints the median CPU seconds (user + sys)
of each, run interleaved in fresh interpreters, and their ratio (import_tensorflow / bare; lower is better).

Then what a full garbage collection costs a worker forked from a server that imported TensorFlow and PyTorch (each
measured row runs one, runtimes.measure.release_free_memory): with what the server imported frozen (gc.freeze, as
proc.forkserver.serve does) and without; their ratio.

    .venv/bin/python bench/bench_tf_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "bare import tensorflow": "import tensorflow",
    "proc.quiet.import_tensorflow": "from deploytool.proc.quiet import import_tensorflow; import_tensorflow()",
}


def _cpu_of(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


GC = """
import gc, time
from deploytool.proc.quiet import import_tensorflow
import_tensorflow(); import torch
def full():
    t = time.process_time(); gc.collect(); return time.process_time() - t
print(min(full() for _ in range(3)), end=" ")
gc.freeze()
print(min(full() for _ in range(3)))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    seen: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):
        for name, code in CASES.items():
            seen[name].append(_cpu_of(code))
    medians = {name: statistics.median(v) for name, v in seen.items()}
    for name, m in medians.items():
        print(f"{name:32s} median {m:.2f} CPU-s  (min {min(seen[name]):.2f}, max {max(seen[name]):.2f})")
    ratio = medians["proc.quiet.import_tensorflow"] / medians["bare import tensorflow"]
    print(f"ratio import_tensorflow / bare: {ratio:.2f}x")
    out = subprocess.run([sys.executable, "-c", GC], cwd=ROOT, check=True, capture_output=True, text=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}).stdout.split()
    before, after = float(out[-2]), float(out[-1])
    print(f"full gc.collect() with TensorFlow and PyTorch imported: {before * 1e3:.0f} ms of CPU; with them frozen: "
          f"{after * 1e3:.1f} ms (ratio {after / before:.3f}x)")


if __name__ == "__main__":
    main()
