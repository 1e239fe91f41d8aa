"""Reproduce a deploytool finding with the runtime alone (no deploytool needed).

    python reproduce.py          # needs numpy and the packages bundle.json names

Copied verbatim into every bug bundle as reproduce.py. It reads bundle.json,
runs model/<file> on inputs.npy one sample at a time with LiteRT or
onnxruntime, and compares with expected.npy (the source model's outputs on the
PC). When the finding is about this very runtime, it exits 1 if the problem
reproduces; when the finding is about a browser or a phone, it shows that the
model itself is fine here and prints what the target produced instead. An
ONNX bundle's backend_test/ folder (ONNX's backend-test layout) is replayed
too: model.onnx on test_data_set_0/input_0.pb, against output_0.pb.
"""

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _quantize(x, detail):
    scale, zero_point = detail["quantization"]
    dtype = np.dtype(detail["dtype"])
    if not scale or dtype.kind not in "iu":
        return x.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale) + zero_point, info.min, info.max).astype(dtype)


def _dequantize(y, detail):
    scale, zero_point = detail["quantization"]
    if not scale or np.dtype(detail["dtype"]).kind not in "iu":
        return y.astype(np.float32)
    return ((y.astype(np.float32) - zero_point) * scale).astype(np.float32)


def run_litert(model, x):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(model))
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    if int(inp["shape"][0]) != 1:
        it.resize_tensor_input(inp["index"], [1, *x.shape[1:]])
    it.allocate_tensors()
    rows = []
    for sample in x:
        it.set_tensor(inp["index"], _quantize(sample[None], inp))
        it.invoke()
        rows.append(_dequantize(it.get_tensor(out["index"]), out).reshape(-1))
    return np.stack(rows)


def run_onnxruntime(model, x):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.stack([np.asarray(sess.run(None, {name: sample[None]})[0]).reshape(-1) for sample in x])


RUNNERS = {"litert": run_litert, "onnxruntime": run_onnxruntime}


def replay_backend_test(folder):
    """ONNX's backend-test case in `folder`, run with onnxruntime: (agreement, max |difference|) with output_0.pb."""
    from onnx import TensorProto, numpy_helper

    def read(path):
        t = TensorProto()
        t.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(t)

    data = folder / "test_data_set_0"
    x, expected = read(data / "input_0.pb"), read(data / "output_0.pb")
    got = run_onnxruntime(folder / "model.onnx", x)
    return compare(got, expected.reshape(len(x), -1)) + (len(x),)


def compare(a, b):
    return float(np.mean(a.argmax(1) == b.argmax(1))), float(np.abs(a - b).max())


def main():
    meta = json.loads((HERE / "bundle.json").read_text())
    x = np.load(HERE / "inputs.npy")
    expected = np.load(HERE / "expected.npy")
    runner = RUNNERS.get(meta["host_runtime"] or "")
    print(meta["title"])
    if meta["status"] == "conversion_failed":
        print(f"the converter said: {meta['reason']}")
        print("model/ holds the source model; README.md gives the versions and the command that converts it")
        return 0
    if runner is None:
        print("no standalone runtime for this format on a PC; see README.md for the deploytool command")
        return 0
    got = runner(HERE / "model" / meta["model_file"], x)
    agreement, max_err = compare(got, expected)
    if meta.get("backend_test"):
        b_agree, b_err, n = replay_backend_test(HERE / meta["backend_test"]["folder"])
        print(f"backend_test/ ({n} samples): top-1 agreement with output_0.pb {b_agree:.2%}, "
              f"max |difference| {b_err:.3g}")
    print(f"{meta['host_runtime']} here: top-1 agreement with the source model {agreement:.2%}, "
          f"max |output difference| {max_err:.3g} over {len(x)} samples")
    observed = HERE / "observed.npy"
    if not meta["judges_itself"]:
        if observed.exists():
            t_agree, t_err = compare(np.load(observed), expected)
            print(f"{meta['where']} produced: agreement {t_agree:.2%}, max |difference| {t_err:.3g} "
                  "on the same inputs (observed.npy)")
        return 0
    limits = meta["pass_limits"]
    reproduced = agreement < limits.get("agreement", 0.0) or max_err > limits.get("max_abs_error", float("inf"))
    print("REPRODUCED: outside the tolerance " + json.dumps(limits) if reproduced else "not reproduced here")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
