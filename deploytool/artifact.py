"""`Artifact`: a model file on disk with everything needed to run it and to
know where it came from. Written as `artifact.json` beside the file; this
module never converts or loads models itself. `Plan`: the conversion route
that makes one (`deploytool.convert.plan`), kept with each row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, field, replace
from pathlib import Path
from typing import Any

from deploytool.modelfiles import onnx_external
from deploytool.modelfiles.signature import Signature, TensorSpec
from deploytool.value import value

# Formats an artifact can have. "keras" and "torch" are the PC originals.
FORMATS = ("keras", "torch", "tflite", "tfjs_graph", "tfjs_layers", "onnx", "saved_model")


# the one input and the one output a single-array model's signature names (implied_signature): its test and
# calibration sets are fed under the input's name (data.Dataset.in_layout)
IMPLIED_INPUT = "input"
IMPLIED_OUTPUT = "output"


def implied_signature(input_shape: tuple[int, ...], num_outputs: int) -> Signature:
    """The signature of a model made from one array (a zoo model, one trained here): one float32 input of
    `input_shape` per sample and one float32 output of `num_outputs` values, named by position (match_names pairs
    them with a file's one input and one output whatever the file calls them)."""
    return Signature((TensorSpec(IMPLIED_INPUT, "float32", (None, *input_shape)),),
                     (TensorSpec(IMPLIED_OUTPUT, "float32", (None, num_outputs)),))


# the signature an Artifact is made with when none is given: replaced by the one its fields imply (__post_init__)
_IMPLIED = Signature((), ())

@value
class Artifact:
    path: Path  # a file, or a directory for SavedModel / TF.js
    format: str
    framework: str  # the framework the model was born in: "keras" or "torch"
    layout: str  # "NHWC" or "NCHW": how inputs must be fed
    input_shape: tuple[int, ...]  # one sample, in `layout`
    num_outputs: int  # size of the output vector per sample
    quantize: str = "none"  # the user's word: none, fp16, dynamic, int8, int8-io, uint8, uint16
    converter: str = ""
    converter_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    source_sha256: str = ""
    sha256: str = ""
    size_bytes: int = 0
    notes: tuple[str, ...] = ()  # e.g. what was done instead of an impossible mode
    # every named input and output: the one thing a runtime binds a model file by. Every artifact has one: a model
    # file's own (read where it enters, deploytool.modelfiles), or, left out, the one its fields imply
    # (implied_signature: a model made here from one array)
    signature: Signature = _IMPLIED

    def __post_init__(self) -> None:
        if not self.signature.inputs:
            object.__setattr__(self, "signature", implied_signature(tuple(self.input_shape), self.num_outputs))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        d["input_shape"] = list(self.input_shape)
        d["notes"] = list(self.notes)
        if self.signature == implied_signature(tuple(self.input_shape), self.num_outputs):
            d.pop("signature")  # the one its fields imply: artifact.json of a model made here reads as it always did
        else:
            d["signature"] = self.signature.to_json()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Artifact":
        d = dict(d)
        d["path"] = Path(d["path"])
        d["input_shape"] = tuple(d["input_shape"])
        d["notes"] = tuple(d.get("notes", ()))
        d["signature"] = Signature.from_json(d["signature"]) if d.get("signature") else _IMPLIED
        return cls(**d)

    def save(self, meta_path: Path) -> None:
        meta_path.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True))

    @classmethod
    def load(cls, meta_path: Path) -> "Artifact":
        """The artifact described by `meta_path`, its file found beside it wherever the workspace now is: a
        cached conversion in a copied or moved workspace points at its own copy, not the old folder's."""
        meta_path = Path(meta_path)
        art = cls.from_json(json.loads(meta_path.read_text()))
        here = meta_path.parent
        parts = art.path.parts
        if here.name in parts:
            rel = parts[len(parts) - 1 - parts[::-1].index(here.name) + 1:]
            moved = here.joinpath(*rel)
            if moved != art.path and moved.exists():
                art = replace(art, path=moved)
        return art


@value
class Plan:
    """What `deploytool.convert.convert` will do for one (source, format, quantize) request: its route. A row
    keeps it (`Result.plan`); stored as its fields, `steps` a list."""

    source_format: str
    fmt: str  # the user's format word: tflite, tfjs, onnx
    quantize: str  # the user's quantize word
    artifact_format: str  # tflite, tfjs_graph, onnx
    steps: tuple[str, ...]  # converter steps run in order, e.g. ("onnx_tf", "onnx_quant")
    mode: str  # what is really done, in words
    note: str | None = None  # set when what is done differs from what the word asks for

    @property
    def converter(self) -> str:
        return "+".join(self.steps)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = list(self.steps)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Plan":
        """A stored plan; a field an odd row lacks reads as empty."""
        return cls(source_format=d.get("source_format") or "", fmt=d.get("fmt") or "",
                   quantize=d.get("quantize") or "", artifact_format=d.get("artifact_format") or "",
                   steps=tuple(d.get("steps") or ()), mode=d.get("mode") or "", note=d.get("note"))


def array_sha256(x: Any) -> str:
    """sha256 of an array's bytes (C order): names a test, calibration or adversarial set by its content."""
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


def content_hash(path: Path) -> str:
    """sha256 of a file, or of a directory's files (names and bytes, sorted); an .onnx file's
    includes the external data files it names."""
    h = hashlib.sha256()
    path = Path(path)
    if path.suffix == ".onnx" and path.is_file():
        return onnx_external.content_hash(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def size_on_disk(path: Path) -> int:
    """Bytes of a file (an .onnx with its external data) or of a directory's files."""
    path = Path(path)
    if path.suffix == ".onnx" and path.is_file():
        return onnx_external.size_on_disk(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
