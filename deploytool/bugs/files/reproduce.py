"""Reproduce a deploytool finding with the runtime alone (no deploytool needed).

    python reproduce.py          # needs numpy and the packages bundle.json names

Copied verbatim into every bug bundle as reproduce.py. It reads bundle.json,
runs model/<file> on inputs.npy (a model of several named inputs: inputs.npz,
one array per input) one sample at a time with LiteRT or onnxruntime, and
compares with expected.npy (the source model's outputs on the PC, every output
side by side in the order bundle.json's output_layout gives). When the finding is about this very runtime, it
exits 1 if the problem reproduces (outputs outside the tolerance, or the runtime failing to load or run the
model); when the finding is about a browser or a phone, it shows that the
model itself is fine here and prints what the target produced instead. An
ONNX bundle's backend_test/ folder (ONNX's backend-test layout) is replayed
too: model.onnx on test_data_set_0/input_<k>.pb, against output_<k>.pb.
"""

import json
import sys
import traceback
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


def _stripped(name):
    """A tensor name without a converter's decorations: serving_default_input_ids:0 -> input_ids."""
    name = name.split(":")[0]
    return name[len("serving_default_"):] if name.startswith("serving_default_") else name


def _pair(wanted, available):
    """Each wanted name -> an available one: the same, the same undecorated, output_<i>, else by position."""
    out, free = {}, list(available)
    for i, w in enumerate(wanted):
        hit = next((a for a in free if a == w or _stripped(a) == _stripped(w)), None)
        hit = hit or (f"output_{i}" if f"output_{i}" in free else None)
        if hit is not None:
            out[w] = hit
            free.remove(hit)
    return out if len(out) == len(wanted) else dict(zip(wanted, available))


def _signature_names(it):
    runners = it.get_signature_list()
    if len(runners) != 1:
        return {}
    r = it.get_signature_runner(next(iter(runners)))
    names = {}
    for details in (r.get_input_details(), r.get_output_details()):
        names.update({int(d["index"]): n for n, d in details.items()})
    return names


def run_litert(model, x, outputs, interpreter=None):
    if interpreter is None:
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter
    it = interpreter(model_path=str(model))
    sig = _signature_names(it)
    ins = {sig.get(int(d["index"]), d["name"]): d for d in it.get_input_details()}
    outs = {sig.get(int(d["index"]), d["name"]): d for d in it.get_output_details()}
    feeds = x if isinstance(x, dict) else {next(iter(ins)): x}
    inputs = {name: ins[m] for name, m in _pair(list(feeds), list(ins)).items()}
    fetch = [outs[m] for m in _pair(outputs or list(outs)[:1], list(outs)).values()]
    for name, d in inputs.items():
        if int(d["shape"][0]) != 1 or list(d["shape"][1:]) != list(feeds[name].shape[1:]):
            it.resize_tensor_input(d["index"], [1, *feeds[name].shape[1:]])
    it.allocate_tensors()
    rows = []
    for i in range(len(next(iter(feeds.values())))):
        for name, d in inputs.items():
            it.set_tensor(d["index"], _quantize(feeds[name][i : i + 1], d))
        it.invoke()
        rows.append(np.concatenate([_dequantize(it.get_tensor(d["index"]), d).reshape(-1) for d in fetch]))
    return np.stack(rows)


def run_onnxruntime(model, x, outputs):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = x if isinstance(x, dict) else {names[0]: x}
    pairs = _pair(list(feeds), names)
    fetch = list(_pair(outputs or [sess.get_outputs()[0].name], [o.name for o in sess.get_outputs()]).values())
    rows = []
    for i in range(len(next(iter(feeds.values())))):
        got = sess.run(fetch, {pairs[n]: a[i : i + 1] for n, a in feeds.items()})
        rows.append(np.concatenate([np.asarray(g, np.float32).reshape(-1) for g in got]))
    return np.stack(rows)


def run_tensorflow_lite(model, x, outputs):
    """TensorFlow's own interpreter (it links the Flex delegate)."""
    import tensorflow as tf

    return run_litert(model, x, outputs, tf.lite.Interpreter)


RUNNERS = {"litert": run_litert, "onnxruntime": run_onnxruntime, "tensorflow-lite": run_tensorflow_lite}


def replay_backend_test(folder):
    """ONNX's backend-test case in `folder`, run with onnxruntime: (agreement, max |difference|) with the
    output_<k>.pb files (every input_<k>.pb fed by its tensor's name)."""
    from onnx import TensorProto, numpy_helper

    def read(path):
        t = TensorProto()
        t.ParseFromString(path.read_bytes())
        return t.name, numpy_helper.to_array(t)

    data = folder / "test_data_set_0"
    inputs = dict(read(p) for p in sorted(data.glob("input_*.pb")))
    outputs = [read(p) for p in sorted(data.glob("output_*.pb"))]
    got = run_onnxruntime(folder / "model.onnx", inputs, [name for name, _ in outputs])
    n = len(next(iter(inputs.values())))
    expected = np.concatenate([a.reshape(n, -1) for _, a in outputs], axis=1)
    return compare(got, expected) + (n,)


def compare(a, b):
    return float(np.mean(a.argmax(1) == b.argmax(1))), float(np.abs(a - b).max())


def main():
    meta = json.loads((HERE / "bundle.json").read_text())
    if (HERE / "inputs.npz").exists():  # a model of several named inputs
        with np.load(HERE / "inputs.npz") as z:
            x = {name: z[name] for name in z.files}
    else:
        x = np.load(HERE / "inputs.npy")
    expected = np.load(HERE / "expected.npy")
    outputs = [name for name, _ in meta.get("output_layout") or []]
    runner = RUNNERS.get(meta["host_runtime"] or "")
    print(meta["title"])
    if runner is None:
        print("no standalone runtime for this format on a PC; see README.md for the deploytool command")
        return 0
    try:
        got = runner(HERE / "model" / meta["model_file"], x, outputs)
    except Exception as e:  # the runtime itself fails on the model: what a load or run finding reports
        traceback.print_exc()
        words = str(e).strip().splitlines()[0] if str(e).strip() else "(no message)"
        same = not meta.get("error") or meta["error"] == type(e).__name__
        if meta["judges_itself"] and meta.get("stage") in ("load", "invoke") and same:
            print(f"REPRODUCED: {meta['host_runtime']} fails on the model: {type(e).__name__}: {words}")
            return 1
        print(f"{meta['host_runtime']} fails on the model here ({type(e).__name__}: {words}), which is not the fault "
              "reported")
        return 2
    agreement, max_err = compare(got, expected)
    mean_err = float(np.abs(got - expected).mean())
    if meta.get("backend_test"):
        b_agree, b_err, n = replay_backend_test(HERE / meta["backend_test"]["folder"])
        print(f"backend_test/ ({n} samples): top-1 agreement with output_0.pb {b_agree:.2%}, "
              f"max |difference| {b_err:.3g}")
    print(f"{meta['host_runtime']} here: top-1 agreement with the source model {agreement:.2%}, "
          f"max |output difference| {max_err:.3g}, mean {mean_err:.3g} over {len(expected)} samples")
    observed = HERE / "observed.npy"
    if not meta["judges_itself"]:
        if observed.exists():
            t_agree, t_err = compare(np.load(observed), expected)
            print(f"{meta['where']} produced: agreement {t_agree:.2%}, max |difference| {t_err:.3g} "
                  "on the same inputs (observed.npy)")
        return 0
    limits = meta["pass_limits"]
    # a route far off its peers (deploytool.bugs.triage.peer_outliers) is held to its peers' mean error alone
    reproduced = (agreement < limits.get("agreement", 0.0) or max_err > limits.get("max_abs_error", float("inf"))
                  or mean_err > limits.get("mean_abs_error", float("inf")))
    print("REPRODUCED: outside the tolerance " + json.dumps(limits) if reproduced else "not reproduced here")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
