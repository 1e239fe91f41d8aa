"""Benchmark (issue 37, one data path): what a timed batch-1 call costs through deploytool's runtime against the
bare library's own loop, for the two host libraries whose calls are shortest (onnxruntime, LiteRT).

Every in-process runtime has one path, named inputs in and named outputs out (`Runtime.predict_feed`, the call the
latency loops and paired timing make); a single-array model (a zoo model, an image classifier) goes through it too.
This prints, per library, the bare loop's time per call, the runtime's, their ratio and the difference in µs: the
part of a row's latency that is deploytool's own. Rounds are interleaved (bare, runtime, bare, ...) and the fastest
round of each is compared, so a busy machine slows both alike.

    .venv/bin/python bench/bench_call_overhead.py [--rounds 15]

A LeNet-like ONNX file with random weights (tests.integration.test_usermodel.onnx_model) and its TFLite twin
(a Keras model of the same shape converted by TFLiteConverter); no download.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]


def per_call_us(fn: Callable[[Any], Any], rows: list[Any], repeats: int = 5) -> float:
    t = time.perf_counter()
    for _ in range(repeats):
        for r in rows:
            fn(r)
    return (time.perf_counter() - t) / (repeats * len(rows)) * 1e6


def tflite_file(path: Path) -> Path:
    import keras
    import tensorflow as tf

    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(6, 5, activation="relu"),
                              keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from deploytool.artifact import Artifact
    from deploytool.data.feed import as_feed
    from deploytool.runtimes.litert import LiteRTRuntime
    from deploytool.runtimes.onnxrt import OnnxRuntime
    from tests.integration.test_usermodel import onnx_model

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        x = np.random.default_rng(0).random((64, 28, 28, 1), dtype=np.float32)
        rows = [x[i:i + 1] for i in range(len(x))]
        cases = []

        onnx = onnx_model(tmp_path / "lenet_like.onnx", [None, 28, 28, 1])
        ort_rt = OnnxRuntime(threads=1)
        ort_rt.load(Artifact(path=onnx, format="onnx", framework="onnx", layout="NHWC", input_shape=(28, 28, 1), num_outputs=10))
        sess = ort_rt._sess
        name = sess.get_inputs()[0].name
        cases.append(("onnxruntime", lambda r: sess.run(None, {name: r}), ort_rt))

        tfl = tflite_file(tmp_path / "lenet_like.tflite")
        lite = LiteRTRuntime(threads=1)
        lite.load(Artifact(path=tfl, format="tflite", framework="keras", layout="NHWC", input_shape=(28, 28, 1), num_outputs=10))
        it = lite._it
        i_in, i_out = int(it.get_input_details()[0]["index"]), int(it.get_output_details()[0]["index"])

        def bare_litert(r: Any) -> Any:
            it.set_tensor(i_in, r)
            it.invoke()
            return it.get_tensor(i_out)

        cases.append(("LiteRT", bare_litert, lite))
        for label, bare, rt in cases:
            feeds = [rt.feed_of(as_feed(r)) for r in rows]  # as the latency loops hold them: converted once, before timing
            ours: Callable[[Any], Any] = rt.predict_feed
            assert np.allclose(np.asarray(bare(rows[0]))[:1].reshape(1, -1), rt.predict(rows[0]).flat(), atol=1e-5)
            b_times, o_times = [], []
            for _ in range(args.rounds):
                b_times.append(per_call_us(bare, rows))
                o_times.append(per_call_us(ours, feeds))
            b, o = min(b_times), min(o_times)
            print(f"{label:12s} bare {b:7.2f} µs/call  deploytool {o:7.2f} µs/call  ratio {o / b:5.2f}x  "
                  f"deploytool's own {o - b:5.2f} µs")
            rt.close()


if __name__ == "__main__":
    main()
