"""The same weights in both frameworks: a trained Keras model is copied into its PyTorch twin (zoo.transfer) and
back into a fresh Keras twin, and the test set runs in all three. What differs then is the frameworks'
arithmetic alone. `logit_differences` is the pure comparison; `compare_same_weights` does the moving and running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deploytool import zoo
from deploytool.proc.quiet import import_tensorflow
from deploytool.proc.threads import pin_tensorflow, pin_torch

LISTED = 20  # differing samples (and largest per-sample differences) listed in a point


def logit_differences(a: np.ndarray, b: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Two models' logits on the same samples: top-1 agreement, max/mean |logit difference|, per-sample maxima
    (percentiles and the largest), and the samples whose predicted class differs."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    pa, pb = a.argmax(1), b.argmax(1)
    per_sample = np.abs(a - b).max(axis=1)
    differ = np.flatnonzero(pa != pb)
    largest = np.argsort(-per_sample, kind="stable")[:LISTED]
    return {
        "n": int(len(a)),
        "agreement": float(np.mean(pa == pb)),
        "accuracy_a": float(np.mean(pa == labels)),
        "accuracy_b": float(np.mean(pb == labels)),
        "max_abs_logit_diff": float(per_sample.max()) if len(a) else 0.0,
        "mean_abs_logit_diff": float(np.abs(a - b).mean()) if len(a) else 0.0,
        "per_sample_max_diff_percentiles": {f"p{q}": float(np.percentile(per_sample, q)) for q in (50, 90, 99)}
        if len(a) else {},
        "n_differing": int(len(differ)),
        "differing": [{"index": int(i), "label": int(labels[i]), "a": int(pa[i]), "b": int(pb[i]),
                       "max_abs_logit_diff": float(per_sample[i])} for i in differ[:LISTED]],
        "largest": [{"index": int(i), "max_abs_logit_diff": float(per_sample[i])} for i in largest],
    }


def compare_same_weights(spec: Any, keras_path: Path, dataset: Any, threads: int) -> dict[str, Any]:
    """Keras model -> PyTorch twin -> fresh Keras twin; the test set through each, compared with the original."""

    facts = {"tensorflow": pin_tensorflow(threads), "torch": pin_torch(threads)}

    import_tensorflow().get_logger().setLevel("ERROR")  # predict() on a model per seed warns of retracing: expected
    import keras
    import torch

    x, y = dataset.x_test, dataset.y_test
    kmodel = keras.saving.load_model(keras_path, compile=False)
    tmodel = zoo.build_torch(spec.architecture, spec.input_shape, spec.num_classes).eval()
    zoo.keras_to_torch(kmodel, tmodel)
    back = zoo.build_keras(spec.architecture, spec.input_shape, spec.num_classes)
    zoo.torch_to_keras(tmodel, back)
    k_logits = kmodel.predict(x, batch_size=512, verbose=0)
    x_nchw = torch.from_numpy(dataset.in_layout(x, "NCHW").first)
    with torch.inference_mode():
        t_logits = torch.cat([tmodel(x_nchw[i : i + 512]) for i in range(0, len(x_nchw), 512)]).numpy()
    b_logits = back.predict(x, batch_size=512, verbose=0)
    weight_diff = max((float(np.abs(np.asarray(w0) - np.asarray(w1)).max()) for w0, w1
                       in zip(kmodel.get_weights(), back.get_weights()) if np.size(w0)), default=0.0)
    return {"keras_vs_torch": logit_differences(k_logits, t_logits, y),
            "keras_vs_roundtrip": logit_differences(k_logits, b_logits, y),
            "roundtrip_max_weight_diff": weight_diff, "threads": facts}
