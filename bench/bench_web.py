"""Benchmark of the web target's harness: on LeNet-5 and up to 10,000 MNIST
digits, how much of the web target's wall time (browser launch, library and
model load, data transfer, inference, results back, close) is spent inside
inference in the page, and how much is harness overhead and data transfer.

Targets (issue 4): harness overhead < 3 s per run, data transfer < 5 % of the
wall time. Run: .venv/bin/python bench/bench_web.py [--samples N] [--webgl]
Writes bench/out/web.json. It trains LeNet-5 for one epoch on the bundled
MNIST split so the fp32 agreement it also prints means something.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OVERHEAD_TARGET_S = 3.0
TRANSFER_TARGET_SHARE = 0.05


def build_artifacts(out: Path, samples: int):
    """LeNet-5 (the zoo's), one epoch of training, and its web artifacts."""
    os.environ.setdefault("TFDF_DISABLE_WELCOME_MESSAGE", "1")
    import keras
    import tensorflow as tf

    from deploytool.artifact import Artifact
    from deploytool.data import mnist
    from deploytool.zoo import build_keras

    raw = mnist.load_bundled()
    keras.utils.set_random_seed(0)
    model = build_keras("lenet5", (28, 28, 1), 10)
    x_train = (raw.x_train.astype(np.float32) / 255.0)[..., None]
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x_train, raw.y_train, epochs=1, batch_size=64, verbose=0)
    # Test digits first, then training digits, to reach `samples` MNIST images.
    x_all = np.concatenate([raw.x_test, raw.x_train]).astype(np.float32) / 255.0
    x = np.ascontiguousarray(x_all[:samples, ..., None])
    y = model.predict(x, batch_size=256, verbose=0).astype(np.float32)

    saved = out / "saved_model"
    model.export(str(saved), verbose=False)
    from tensorflowjs.converters import convert_tf_saved_model

    convert_tf_saved_model(str(saved), str(out / "tfjs"))
    import tf2onnx

    spec = (tf.TensorSpec((None, 28, 28, 1), tf.float32, name="input"),)
    fn = tf.function(lambda t: model(t), input_signature=spec)
    tf2onnx.convert.from_function(fn, input_signature=spec, opset=17, output_path=str(out / "lenet5.onnx"))
    (out / "lenet5.tflite").write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())

    def art(path: Path, fmt: str) -> Artifact:
        return Artifact(path=path, format=fmt, framework="keras", layout="NHWC", input_shape=(28, 28, 1),
                        num_outputs=10)

    arts = {"tfjs_graph": art(out / "tfjs", "tfjs_graph"), "onnx": art(out / "lenet5.onnx", "onnx"),
            "tflite": art(out / "lenet5.tflite", "tflite")}
    return arts, x, y


def bench_one(artifact, x: np.ndarray, y: np.ndarray, **options) -> dict:
    from deploytool.runtimes.web import WebRuntime

    t0 = time.perf_counter()
    rt = WebRuntime(**options)
    try:
        rt.load(artifact)
        out = rt.run(x)
    finally:
        rt.close()
    wall_s = time.perf_counter() - t0
    t = out.environment["timings_ms"]
    inference_s = t["inference"] / 1e3
    transfer_s = (t["inputs_write"] + t["inputs_fetch"] + t["results_post"] + t["results_collect"]) / 1e3
    return {
        "runtime": out.environment["runtime"], "backend": out.environment["backend"],
        "threads": out.environment["threads"], "samples": len(x),
        "wall_s": wall_s, "inference_in_page_s": inference_s, "overhead_s": wall_s - inference_s,
        "transfer_s": transfer_s, "transfer_share": transfer_s / wall_s,
        "inputs_mb": x.nbytes / 2**20,
        "p50_ms": float(np.median(out.latency_ms)), "p90_ms": float(np.percentile(out.latency_ms, 90)),
        "throughput_sps": out.throughput_sps,
        "top1_agreement": float((out.outputs.argmax(1) == y.argmax(1)).mean()),
        "max_abs_diff": float(np.abs(out.outputs - y).max()),
        "timings_ms": t, "memory_bytes": out.memory_bytes,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000, help="MNIST digits to run (max 10,000)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--webgl", action="store_true", help="also run TF.js webgl (SwiftShader: ~5-10 ms a sample)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "web.json")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        t0 = time.perf_counter()
        arts, x, y = build_artifacts(Path(tmp), args.samples)
        print(f"built LeNet-5 and its web artifacts in {time.perf_counter() - t0:.1f} s; "
              f"{len(x)} samples, {x.nbytes / 2**20:.1f} MiB of float32 input", flush=True)
        runs = [("tfjs_graph", {"backend": "wasm"}), ("tfjs_graph", {"backend": "cpu"}),
                ("onnx", {}), ("tflite", {})]
        if args.webgl:
            runs.append(("tfjs_graph", {"backend": "webgl"}))
        rows = []
        for fmt, opts in runs:
            row = bench_one(arts[fmt], x, y, threads=args.threads, **opts)
            rows.append(row)
            print(f"  {row['runtime']:<24} {row['backend']:<12} wall {row['wall_s']:6.2f} s  "
                  f"inference {row['inference_in_page_s']:6.2f} s  overhead {row['overhead_s']:5.2f} s  "
                  f"transfer {row['transfer_s']:5.3f} s ({100 * row['transfer_share']:4.1f} %)  "
                  f"p50 {row['p50_ms']:.3f} ms  agree {100 * row['top1_agreement']:.1f} %", flush=True)

    worst_overhead = max(r["overhead_s"] for r in rows)
    worst_share = max(r["transfer_share"] for r in rows)
    ok = worst_overhead < OVERHEAD_TARGET_S and worst_share < TRANSFER_TARGET_SHARE
    print(f"harness overhead per run: max {worst_overhead:.2f} s (target < {OVERHEAD_TARGET_S:g} s); "
          f"transfer share: max {100 * worst_share:.1f} % (target < {100 * TRANSFER_TARGET_SHARE:g} %): "
          f"{'met' if ok else 'NOT met'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "targets_met": ok}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
