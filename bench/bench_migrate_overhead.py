"""Benchmark (issue 3): the time `migrate` spends around the runtimes (data,
cache look-ups, comparing, storing, reporting, and the process's own start-up)
against the time inside them (load + run of each artifact), for the LeNet-5
host matrix once artifacts are cached. Target: overhead under 25% of the total.

    .venv/bin/python bench/bench_migrate_overhead.py [--workspace DIR]

The first migrate fills the caches (training, baseline, conversions) and is not
timed; the second is a fresh run (`--fresh`: everything measured again) timed
from outside, as a user would see it, and from inside.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CMD = ["migrate", "--model", "lenet5", "--target", "host", "--format", "all", "--quantize", "all", "--quiet"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, default=None, help="reuse a workspace (default: a temporary one)")
    args = ap.parse_args()
    tmp = None
    ws = args.workspace
    if ws is None:
        tmp = tempfile.TemporaryDirectory()
        ws = Path(tmp.name)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "deploytool", *CMD, "--workspace", str(ws)], check=False,
                   capture_output=True)
    fill_s = time.perf_counter() - t

    # the timed run, in a subprocess so its start-up is counted, reporting its own split as JSON
    code = (
        "import json, sys, time; t0 = time.perf_counter()\n"
        "from deploytool.migrate import MigrateRequest, migrate\n"
        f"req = MigrateRequest(model='lenet5', targets=('host',), fresh=True)\n"
        f"out = migrate(req, {str(ws)!r}, progress=False, log=lambda s: None)\n"
        "print(json.dumps({'inside': out.seconds_in_runtimes, 'converting': out.seconds_converting,"
        " 'report': out.seconds_report, 'migrate': out.seconds_total, 'process': time.perf_counter() - t0,"
        " 'rows': len(out.results), 'failing': len(out.failing)}))\n"
    )
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    d = json.loads(r.stdout.strip().splitlines()[-1])
    overhead = wall - d["inside"]
    print(f"LeNet-5 host matrix: {d['rows']} rows ({d['failing']} failing); cache fill run {fill_s:.1f} s")
    print(f"wall time of the cached run (process start to exit): {wall:.2f} s")
    print(f"  inside the runtimes (load + run, all rows):        {d['inside']:.2f} s")
    print(f"  converting (cache look-ups):                       {d['converting']:.2f} s")
    print(f"  writing the report:                                {d['report']:.3f} s")
    print(f"  interpreter start-up + imports before migrate():  {wall - d['process']:.2f} s")
    print(f"overhead = wall - inside = {overhead:.2f} s = {overhead / wall:.1%} of the total (target < 25%)")
    print(f"overhead inside migrate() only = {d['migrate'] - d['inside']:.2f} s = "
          f"{(d['migrate'] - d['inside']) / d['migrate']:.1%} of migrate()")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
