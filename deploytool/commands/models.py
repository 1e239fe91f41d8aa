"""`deploytool models`, `train` and `baseline`: the zoo's manifests, training a zoo model on the PC (cached), and
its PC baseline (accuracy, latency, memory, size)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from deploytool.commands.common import print_table
from deploytool.data import load_dataset
from deploytool.run.baseline import run_baseline
from deploytool.spec import load_spec, manifest_paths, parse_spec
from deploytool.train import train
from deploytool.workspace import Workspace


def models(args: argparse.Namespace) -> int:
    rows = []
    for path in manifest_paths():
        s = parse_spec(path)
        lo = s.expected_accuracy[0]
        reads = f"{s.input_kind} {'x'.join(map(str, s.model_input_shape))}"  # the images as its input kind reads them
        rows.append((s.name, s.architecture, s.dataset, "x".join(map(str, s.input_shape)), reads,
                     ",".join(s.frameworks), f">= {lo:.0%}", s.description))
    print_table(("model", "architecture", "dataset", "images", "reads", "frameworks", "expected", "description"), rows)
    return 0


def _frameworks(spec: Any, choice: str) -> list[str]:
    return list(spec.frameworks) if choice == "all" else [choice]


def _train_all(args: argparse.Namespace) -> Any:
    spec = load_spec(args.model)
    ws = Workspace.open(args.workspace)
    dataset = load_dataset(spec, args.data_dir)
    results = []
    for fw in _frameworks(spec, args.framework):
        r = train(spec, fw, dataset, ws, epochs=args.epochs, progress=not args.quiet, threads=args.threads)
        if r.cached:
            print(f"{spec.name} [{fw}]: reusing the cached model ({r.key}); nothing to train")
        else:
            per_epoch = sum(r.seconds_per_epoch) / len(r.seconds_per_epoch)
            used = r.provenance.get("threads", {}).get("intra_op_threads", "?")
            print(f"{spec.name} [{fw}]: trained {r.epochs} epochs, {per_epoch:.1f} s/epoch, "
                  f"peak RSS {r.peak_rss_bytes / 2**20:.0f} MiB, CPU {r.cpu_utilisation_percent:.0f}%, "
                  f"{used} intra-op thread(s)")
        lo, hi = spec.expected_accuracy
        flag = "" if lo <= r.test_accuracy <= hi else f"  (outside the expected range {lo:.0%}-{hi:.0%})"
        print(f"  test accuracy {r.test_accuracy:.2%}{flag}; model: {r.get_artifact().path}")
        results.append(r)
    return spec, dataset, results


def train_command(args: argparse.Namespace) -> int:
    _train_all(args)
    return 0


def baseline(args: argparse.Namespace) -> int:
    spec, dataset, results = _train_all(args)
    rows = []
    for r in results:
        b = run_baseline(spec.name, r.get_artifact(), dataset, warmup_runs=args.warmup,
                         latency_samples=args.latency_samples, threads=args.threads)
        lat = b.latency
        peak = b.memory_bytes.get("process_peak_rss_bytes") or b.memory_bytes.get("process_lifetime_peak_rss_bytes", 0)
        rows.append((f"{spec.name} [{r.framework}]", f"{b.accuracy:.2%}", str(b.num_samples),
                     f"{lat['p50_ms']:.3f}", f"{lat['p90_ms']:.3f}", f"{lat['p99_ms']:.3f}", f"{lat['mean_ms']:.3f}",
                     f"{b.throughput_sps:.0f}" if b.throughput_sps else "-", f"{peak / 2**20:.0f}",
                     f"{b.size_bytes / 1024:.0f}", "cached" if b.cached else "measured"))
    print_table(("PC baseline", "accuracy", "samples", "p50 ms", "p90 ms", "p99 ms", "mean ms", "samples/s",
                  "peak RSS MiB", "size KiB", ""), rows)
    print(f"baseline JSON beside each model in {Path(results[0].get_artifact().path).parent.parent}")
    return 0
