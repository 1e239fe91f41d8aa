"""Benchmark (issue 2): training seconds per epoch and PC-baseline latency of
LeNet-5 in Keras and PyTorch, on the bundled MNIST split, from scratch (a fresh
temporary workspace, so nothing is cached). Prints numbers and ratios; asserts
nothing.

    .venv/bin/python bench/bench_train_baseline.py [--epochs N]
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=None, help="default: the manifest's")
    args = ap.parse_args()

    from deploytool.run.baseline import run_baseline
    from deploytool.data import load_dataset
    from deploytool.spec import load_spec
    from deploytool.train import train
    from deploytool.workspace import Workspace

    spec = load_spec("lenet5")
    ds = load_dataset(spec)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(tmp)
        for fw in ("keras", "torch"):
            tr = train(spec, fw, ds, ws, epochs=args.epochs, progress=False)
            b = run_baseline(spec.name, tr.get_artifact(), ds)
            rows[fw] = (tr, b)
    print(f"LeNet-5, {len(ds.x_train)} training / {len(ds.x_test)} test digits, batch {spec.train.batch_size}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'framework':10} {'s/epoch':>8} {'1st epoch':>9} {'acc':>7} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
          f"{'mean ms':>8} {'samples/s':>10} {'train RSS MiB':>13} {'CPU %':>6}")
    for fw, (tr, b) in rows.items():
        steady = tr.seconds_per_epoch[1:] or tr.seconds_per_epoch
        lat = b.latency
        print(f"{fw:10} {sum(steady) / len(steady):8.2f} {tr.seconds_per_epoch[0]:9.2f} {tr.test_accuracy:7.2%} "
              f"{lat['p50_ms']:8.3f} {lat['p90_ms']:8.3f} {lat['p99_ms']:8.3f} {lat['mean_ms']:8.3f} "
              f"{b.throughput_sps:10.0f} {tr.peak_rss_bytes / 2**20:13.0f} {tr.cpu_utilisation_percent:6.0f}")
    (k, kb), (t, tb) = rows["keras"], rows["torch"]
    ks, ts = sum(k.seconds_per_epoch) / k.epochs, sum(t.seconds_per_epoch) / t.epochs
    print(f"ratio torch/keras: train s/epoch {ts / ks:.2f}, baseline p50 {tb.latency['p50_ms'] / kb.latency['p50_ms']:.2f}, "
          f"throughput {tb.throughput_sps / kb.throughput_sps:.2f}")


if __name__ == "__main__":
    main()
