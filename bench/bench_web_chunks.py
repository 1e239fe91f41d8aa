"""Benchmark (issue 38, part 3): the browser's memory against the size of the test set. A cheap ONNX model on
224x224x3 images runs in headless Chromium (onnxruntime-web, wasm) on a small and a large test set, once with the
test set sent to the page in chunks (the default, WebOptions.chunk_bytes = 256 MiB of inputs) and once in one
piece. Prints the renderer's peak RSS of each and the large/small ratios (goal with chunks: within 10%).

    .venv/bin/python bench/bench_web_chunks.py [--small 200] [--large 1600]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from deploytool.artifact import Artifact
from deploytool.runtimes.web import CHUNK_BYTES, WebRuntime

SIZE = 224


def _model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).normal(0, 0.1, (8, 3, 16, 16)).astype(np.float32)
    d = np.random.default_rng(1).normal(0, 0.1, (8, 10)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], strides=[16, 16]),
         helper.make_node("GlobalAveragePool", ["c"], ["p"]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("MatMul", ["f", "d"], ["scores"])],
        "cheap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(d, "d")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def _peak(path: Path, n: int, chunk_bytes: int) -> float:
    x = np.random.default_rng(2).uniform(-1, 1, (n, 3, SIZE, SIZE)).astype(np.float32)
    rt = WebRuntime(warmup_runs=1, latency_samples=5, chunk_bytes=chunk_bytes, timeout_s=1200)
    try:
        rt.load(Artifact(path=path, format="onnx", framework="onnx", layout="NCHW", input_shape=(3, SIZE, SIZE),
                         num_outputs=10))
        out = rt.run(x)
    finally:
        rt.close()
    return out.memory_bytes["renderer_peak_rss_bytes"] / 2**20


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--small", type=int, default=200)
    p.add_argument("--large", type=int, default=1600)
    p.add_argument("--chunk-mib", type=float, default=CHUNK_BYTES / 2**20)
    a = p.parse_args()
    chunk_bytes = int(a.chunk_mib * 2**20)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cheap.onnx"
        _model(path)
        per = 3 * SIZE * SIZE * 4
        print(f"inputs: {a.small} samples = {a.small * per / 2**20:.0f} MiB, {a.large} = {a.large * per / 2**20:.0f} "
              f"MiB; chunks of {chunk_bytes / 2**20:g} MiB")
        for label, chunk in (("in chunks", chunk_bytes), ("in one piece", 2**62)):
            small, large = _peak(path, a.small, chunk), _peak(path, a.large, chunk)
            print(f"{label}: renderer peak RSS {small:.0f} MiB at {a.small}, {large:.0f} MiB at {a.large} "
                  f"({large / small:.2f}x)")


if __name__ == "__main__":
    main()
