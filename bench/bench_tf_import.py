"""Benchmark (issue 37, item 7): the CPU an import of TensorFlow costs a process of deploytool's (a runtime's or a
conversion's worker server, a CLI run: dozens in a `make test`), through proc.quiet.import_tensorflow, against a bare
`import tensorflow`. TensorFlow 2.19 and its Keras 3 import JAX, pandas and scikit-learn when they are installed,
for features deploytool does not use; import_tensorflow holds them back. Prints the median CPU seconds (user + sys)
of each, run interleaved in fresh interpreters, and their ratio (import_tensorflow / bare; lower is better).

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


if __name__ == "__main__":
    main()
