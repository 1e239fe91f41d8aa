"""Small pieces every converter module shares: the `Mode` a user word maps to,
the calibration subset, and the finished `Artifact`. No framework is imported
here; this module must stay importable by the fast unit tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deploytool.artifact import Artifact, content_hash, size_on_disk
from deploytool.data.feed import Feed
from deploytool.errors import Raised, StageFailed
from deploytool.modelfiles.signature import Signature
from deploytool.provenance import package_version
from deploytool.value import value

# A few hundred samples calibrate a small CNN as well as thousands do; the cap
# keeps int8 conversion time flat whatever the training-split size.
MAX_CALIBRATION_SAMPLES = 256


@value
class Mode:
    description: str  # what is really done
    note: str | None = None  # what was done instead of what the word asks, said to the user
    alias: bool = False  # the same artifact as another word's: `--quantize all` skips it


def calibration_subset(calibration: Feed | None, what: str) -> Feed:
    """At most MAX_CALIBRATION_SAMPLES rows spread evenly over the training split: the model's named inputs, float
    ones as float32 and integer ones (token ids, masks) kept."""
    if calibration is None or len(calibration) == 0:
        raise StageFailed("conversion_failed", f"{what} needs calibration samples from the training split "
                                               "and none were given")
    n = len(calibration)
    idx = np.linspace(0, n - 1, num=min(n, MAX_CALIBRATION_SAMPLES)).round().astype(int)
    sub: Feed = calibration[np.unique(idx)]
    return sub.map(lambda _, a: np.ascontiguousarray(a, dtype=np.float32 if a.dtype.kind == "f" else a.dtype))


def dist_version(dist: str) -> str:
    """The installed version of a converter's distribution (provenance's one reading of the installed
    packages, as every row's versions)."""

    return package_version(dist) or ""


def finish(source: Artifact, path: Path, fmt: str, quantize: str, converter: str, converter_version: str,
           options: dict[str, Any], notes: tuple[str, ...] = (), layout: str | None = None) -> Artifact:
    """The Artifact of a converted file: the source's I/O description, this file's hash and size."""
    return Artifact(path=Path(path), format=fmt, framework=source.framework, layout=layout or source.layout,
                    input_shape=tuple(source.input_shape), num_outputs=source.num_outputs, quantize=quantize,
                    converter=converter, converter_version=converter_version, options=dict(options),
                    source_sha256=source.sha256, sha256=content_hash(path), size_bytes=size_on_disk(path),
                    notes=tuple(notes), signature=source.signature)


def check_onnx(model: Any) -> None:
    """Raise when an ONNX model (proto or path) has nodes no ONNX runtime knows.

    tf2onnx continues past ops it cannot convert and leaves them in the graph;
    the checker refuses ops that no registered schema describes.
    """
    import onnx

    onnx.checker.check_model(model if isinstance(model, onnx.ModelProto) else str(model))


def onnx_input_names(path: Path) -> list[str]:
    """The graph inputs of an ONNX model that are not initializers, in order."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    return [i.name for i in graph.input if i.name not in initializers]


def onnx_input_name(path: Path) -> str:
    """The one graph input of an ONNX model that is not an initializer (onnx is imported here, not at start-up)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    names = [i.name for i in graph.input if i.name not in initializers]
    if len(names) != 1:
        raise ValueError(f"the model has {len(names)} inputs; deploytool handles one-input models")
    return names[0]


def torch_samples(source: Artifact, calibration: Any, batch: int) -> tuple[Any, ...]:
    """Zero tensors to trace a PyTorch source with: one per input, `batch` samples, each input's own dtype;
    a dimension the model leaves open (a sequence length) takes the data's."""
    import torch

    first = calibration[:1] if calibration is not None and len(calibration) else None
    out = []
    for t in source.signature.inputs:
        dims = [d if d is not None else (first[t.name].shape[i + 1] if first is not None else 1)
                for i, d in enumerate(t.sample_shape)]
        out.append(torch.zeros((batch, *dims), dtype=getattr(torch, t.dtype)))
    return tuple(out)


def torch_calibration_batches(samples: Any, i: int) -> tuple[Any, ...]:
    """Sample `i` of a calibration set as the tensors a PyTorch module takes (every input of a Feed)."""
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(a[i : i + 1])) for a in samples.arrays())


def refuse_integer_io_for_integer_inputs(sig: Signature, quantize: str) -> None:
    """int8-io makes every input an int8 tensor: meaningless for inputs that take integers already (the planner
    refuses such a request in one line; a converter called on its own says so too)."""
    if quantize == "int8-io" and not sig.all_float_inputs:
        raise StageFailed("unsupported", "int8-io makes every input an int8 tensor, but "
                          + ", ".join(t.describe() for t in sig.inputs if not t.is_float)
                          + " takes integers already (ids, masks); use int8")



@value
class Recipe:
    """A converter step's call as standalone Python, for a bug bundle's `reproduce_convert.py`: `code` is the body
    of a function that converts SOURCE (the step's input in the bundle) into OUT with the options deploytool uses
    for the quantization (CALIBRATION: the calibration arrays by input name, or None; INPUTS: (name, dtype,
    one sample's shape) of each model input), and `imports` the distributions it imports (their versions are
    pinned on the bundle's pip line). It must match what the step's `convert` calls; only the tool is called."""

    code: str
    imports: tuple[str, ...]
    output: str  # OUT's name: a file ("model.tflite") or a folder ("tfjs")


# zero tensors like torch_samples' (one per input, its dtype; INPUTS gives one sample's shape, open dims filled)
TORCH_SAMPLES_RECIPE = ("import torch\n"
                        "def samples(batch):\n"
                        "    return tuple(torch.zeros((batch, *shape), dtype=getattr(torch, dtype)) "
                        "for _, dtype, shape in INPUTS)\n"
                        "program = torch.export.load(SOURCE)  # the bundle's copy, re-saved by deploytool\n")


def saved_model_recipe(source: Artifact) -> str:
    """The lines that give `saved` (a SavedModel folder) for a Keras or SavedModel source, as saved_model_dir does."""
    if source.format == "keras":
        return ("import keras\n"
                "model = keras.saving.load_model(SOURCE, compile=False, safe_mode=True)\n"
                "model.export('saved_model', format='tf_saved_model', verbose=False)\n"
                "saved = 'saved_model'\n")
    return "saved = SOURCE\n"


def fallback(step: str, failed: str, error: BaseException, used: str) -> dict[str, Any]:
    """What a step records when its first call failed and the documented alternative worked (Artifact.options
    "fallback"): the step, the call that failed and its exception (deploytool.errors.Raised as JSON, for triage
    and the bug bundle that reproduces it), and what was used instead."""
    return {"step": step, "failed": failed, "raised": Raised.of(error).to_json(), "used": used}


def fallback_note(fb: dict[str, Any]) -> str:
    """The row's note for a fallback: what failed, what was used, and that the failure is an upstream candidate."""
    raised = Raised.from_json(fb.get("raised"))
    words = f"{raised.name}: {raised.first_line}" if raised is not None and raised.first_line else \
        (raised.name if raised is not None else "an error")
    return (f"{fb['failed']} failed ({words}); converted with {fb['used']}, the documented alternative: the "
            "failure is an upstream candidate (`deploytool findings`)")
