"""Benchmark (issue 38, part 3): what a real-size test set costs on the host.

1. Per-sample cost of deploytool's accuracy pass (the batched, untimed whole-set run of a host row, in its
   measuring worker) against the bare runtime's own batched loop (onnxruntime, the same model, batch and threads,
   in this process). Goal: at most 1.2x.
2. Peak memory of a host row at 500 and at 5,000 samples of 224x224x3: the row's own figure (the worker's peak
   above its idle RSS, `isolated_peak_rss_delta_bytes`) and the worker's whole peak RSS (`process_peak_rss_bytes`,
   the test set it was handed included). Goal: within 10%.
3. Paired latency of a slow model (a BERT-base-sized stack of matmuls, ~0.1-0.7 s per inference) against itself:
   the wall time of its timing (goal: under a minute on 2 cores) and the blocks it got.

    .venv/bin/python bench/bench_real_size.py [--samples 500,1000,5000] [--skip-pairing]

The models are made here with onnx's own helpers (random weights, no download).

Measured 2026 on the shared 2-core VM (load average ~7): accuracy pass / bare loop 1.01x and 1.82x at 500 samples
(two runs: the machine's noise), 0.96x at 5,000; memory at 500 -> 5,000 samples: the row's figure 401 -> 707 MiB,
the worker's peak 752 -> 3,642 MiB (the 2.8 GiB test set is handed to the worker whole): the 10% goal is not met.
Since the set goes to the worker as a file read a batch at a time (deploytool.data.ondisk), measured beside a running
atlas: the worker's peak 605 -> 882 MiB at 500 -> 5,000 samples (was 752 -> 3,642), the row's figure 541 -> 818 MiB
(its growth, as before, is onnxruntime's own over more batches, not the set); accuracy pass / bare loop 1.22x and
1.90x under that load, 1.33x and 1.29x on the idle machine (the goal, 1.2x, is not met: each batch is read from the
file into a fresh array).
Since the whole-set pass bounds a batch by its bytes (16 MiB: 27 of these images; deploytool.runtimes.measure), on
the same machine beside a running full-tier atlas: the worker's peak RSS 135, 135 and 136 MiB at 500, 1,000 and
5,000 samples (the bare script at the same batch: 123 MiB at each); at 256 per batch it had been 612 -> 918 MiB,
and the bare script's own 593 -> 887 -> 870 MiB (onnxruntime's memory planner lays out a batch shape's buffers on
its third run: the growth was the runtime's, at that batch).
Paired timing of the BERT-base-sized stack (0.43 s an inference) with a 30 s budget: 34 blocks, 53 s wall; the
budget is 20 s since.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def conv_model(path: Path) -> None:
    """A small convnet on NCHW 3x224x224 (three strided convs, pooling, a 10-way dense)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes, prev, ch = [], [], "x", 3
    for i, out in enumerate((16, 32, 64)):
        w = numpy_helper.from_array((rng.normal(0, 0.1, (out, ch, 3, 3))).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], strides=[2, 2], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev, ch = f"r{i}", out
    inits.append(numpy_helper.from_array(rng.normal(0, 0.1, (ch, 10)).astype(np.float32), "wd"))
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("MatMul", ["f", "wd"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def matmul_stack(path: Path, layers: int = 12, seq: int = 128, width: int = 768) -> None:
    """BERT-base's dense work at sequence 128: per layer 4 x (768 x 768) and 768 x 3072 x 768 matmuls (~85 M weights,
    ~22 GFLOP per inference); one sample is (seq, width)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes, prev = [], [], "x"
    for i in range(layers):
        for j, (a, b) in enumerate(((width, width),) * 4 + ((width, 4 * width), (4 * width, width))):
            name = f"w{i}_{j}"
            inits.append(numpy_helper.from_array((rng.normal(0, 1 / np.sqrt(a), (a, b))).astype(np.float32), name))
            nodes.append(helper.make_node("MatMul", [prev, name], [f"{name}_o"]))
            prev = f"{name}_o"
    nodes.append(helper.make_node("ReduceMean", [prev], ["y"], axes=[1], keepdims=0))
    graph = helper.make_graph(nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", seq, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def artifact(path: Path, shape: tuple[int, ...], layout: str, outputs: int) -> "object":
    from deploytool.artifact import Artifact, content_hash, size_on_disk

    return Artifact(path=path, format="onnx", framework="onnx", layout=layout, input_shape=shape, num_outputs=outputs,
                    sha256=content_hash(path), size_bytes=size_on_disk(path))


def bare_per_sample_s(path: Path, x: np.ndarray, batch: int) -> float:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": x[:batch]})  # warm
    t = time.perf_counter()
    for i in range(0, len(x), batch):
        sess.run(None, {"x": x[i : i + batch]})
    return (time.perf_counter() - t) / len(x)


BARE_PEAK = """
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
shape = np.load(sys.argv[2], mmap_mode="r").shape  # the header only; the samples are read below
with open(sys.argv[2], "rb") as f:
    f.seek(-int(np.prod(shape)) * 4, 2)
    for i in range(0, shape[0], int(sys.argv[3])):
        n = min(int(sys.argv[3]), shape[0] - i)
        s.run(None, {"x": np.fromfile(f, np.float32, n * int(np.prod(shape[1:]))).reshape(n, *shape[1:])})
print([int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0] * 1024)
"""


def bare_peak_rss(path: Path, x: np.ndarray, tmp: Path, batch: int) -> int:
    """Peak RSS of a bare onnxruntime script reading the same set from an .npy file a batch at a time
    (a fresh process: the model, onnxruntime's arena and planner, one batch; no memory map, whose pages count)."""
    import subprocess
    import sys

    np.save(tmp / "set.npy", x)
    out = subprocess.run([sys.executable, "-c", BARE_PEAK, str(path), str(tmp / "set.npy"), str(batch)], capture_output=True,
                         text=True, check=True)
    (tmp / "set.npy").unlink()
    return int(out.stdout.strip())


def accuracy_pass(tmp: Path, sizes: list[int]) -> None:
    from deploytool.runtimes.isolated import load_and_run, runtime_workers

    path = tmp / "conv.onnx"
    conv_model(path)
    art = artifact(path, (3, 224, 224), "NCHW", 10)
    batch = 256
    with runtime_workers():
        for n in sizes:
            x = np.random.default_rng(1).random((n, 3, 224, 224), dtype=np.float32)
            out = load_and_run("host", "onnx", "", art, x, threads=1, warmup_runs=2, latency_samples=10,
                               batch_size=batch)
            ours = 1.0 / out.throughput_sps
            used = int(out.environment["throughput_batch"])  # the batch deploytool chose (measure.whole_set_batch)
            bare = bare_per_sample_s(path, x, used)
            mem = out.memory_bytes
            bare_rss = bare_peak_rss(path, x, tmp, used)
            print(f"{n:>5} samples of 3x224x224 ({x.nbytes / 2**20:.0f} MiB), batches of {used}: accuracy pass "
                  f"{1e3 * ours:.3f} ms/sample, "
                  f"bare onnxruntime loop {1e3 * bare:.3f} ms/sample, ratio {ours / bare:.2f}x (goal <= 1.2x); "
                  f"row's memory figure {mem.get('isolated_peak_rss_delta_bytes', 0) / 2**20:.0f} MiB, worker's "
                  f"peak RSS {mem.get('process_peak_rss_bytes', 0) / 2**20:.0f} MiB; a bare onnxruntime script "
                  f"streaming the set: peak RSS {bare_rss / 2**20:.0f} MiB")
            del x


def pairing(tmp: Path) -> None:
    from deploytool.runtimes.isolated import paired_latency
    from deploytool.runtimes.onnxrt import OnnxRuntime

    path = tmp / "stack.onnx"
    matmul_stack(path)
    art = artifact(path, (128, 768), "NC", 768)
    x = np.random.default_rng(2).random((48, 128, 768), dtype=np.float32)
    opts = {"threads": 1, "warmup_runs": 10}
    t = time.perf_counter()
    p = paired_latency(OnnxRuntime, {**opts, "timeout_s": 600}, art, x, OnnxRuntime, opts, art, x, "itself")
    wall = time.perf_counter() - t
    print(f"paired timing of a BERT-base-sized model ({path.stat().st_size / 2**20:.0f} MB, p50 "
          f"{p.target_p50_ms:.0f} ms): {wall:.1f} s wall incl. worker start and load (goal < 60 s), {p.blocks} blocks, "
          f"ratio {p.ratio:.3f} [{p.ratio_low:.3f}, {p.ratio_high:.3f}]")
    print("  " + p.describe())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", default="500,1000,5000")
    ap.add_argument("--skip-pairing", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        accuracy_pass(Path(d), [int(v) for v in args.samples.split(",")])
        if not args.skip_pairing:
            pairing(Path(d))


if __name__ == "__main__":
    main()
