"""`ModelSpec`: a model manifest (`models/*.toml`) read and validated.

Everything that affects a number is written in the manifest — architecture,
dataset, input shape and layout, preprocessing, labels, training
hyperparameters, the accuracy it is expected to reach and the tolerances a
migrated model is judged by. This module only reads and checks manifests; it
never trains or loads data.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

from deploytool.errors import SpecError, UnknownModel, WorkspaceError
from deploytool.kinds import get_kind
from deploytool.modelfiles.signature import Signature
from deploytool.tolerances import DEFAULT_TOLERANCES, TOLERANCE_GROUPS, TOLERANCE_METRICS, tolerance_problem
from deploytool.value import value
from deploytool.workspace import check_name

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
LAYOUTS = ("NHWC", "NCHW")
FRAMEWORKS = ("keras", "torch")
OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "cosine")
DATASETS = ("mnist", "cifar10", "digits", "synthetic")


@value
class Preprocess:
    """x = (raw * scale - mean[c]) / std[c], per channel, on float32."""

    scale: float = 1.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)


@value
class TrainSpec:
    epochs: int
    batch_size: int
    optimizer: str
    learning_rate: float
    seed: int
    schedule: str = "constant"  # or "cosine": decay to 0 over all steps, per batch


@value
class ModelSpec:
    name: str
    architecture: str
    frameworks: tuple[str, ...]
    dataset: str
    input_shape: tuple[int, int, int] | tuple[()]  # H, W, C (the layout below says how it is fed); () with a signature
    layout: str
    labels: tuple[str, ...]
    preprocess: Preprocess
    train: TrainSpec
    expected_accuracy: tuple[float, float]
    tolerances: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    description: str = ""
    source: str = ""  # the manifest file
    task: str = "classification"  # what the first output is judged as (deploytool.tasks)
    # every named input and output, for a model that is not one image in and class scores out (a user's
    # sequence, token or tabular model); None for the image classifiers (input_shape and labels say it all)
    signature: Signature | None = None
    scored_output: str = ""  # the output a classifier is scored on ("": its first, or the only one)
    input_name: str = ""  # an image classifier file's input name: its test images may be stored under it
    # the input kind (deploytool.kinds) the model reads. Set where the spec is made: a zoo architecture's own
    # (deploytool.zoo.register_architecture), an image for a user's image classifier; derived, so not in the hash
    input_kind: str = "image"

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    @property
    def hwc(self) -> tuple[int, int, int]:
        """H, W, C of an image-shaped input: every zoo model's and an image classifier's (a model with a
        signature has none; its inputs say what they are)."""
        if not self.input_shape:
            raise ValueError(f"model {self.name} has no image input shape: its signature describes its inputs")
        return self.input_shape

    @property
    def model_input_shape(self) -> tuple[int, ...]:
        """One sample as the model takes it: the image (H, W, C), or its rows as a sequence, or its values (the
        input kind's rule)."""
        if not self.input_shape:
            return self.input_shape
        return get_kind(self.input_kind).from_hwc(self.input_shape)

    def tolerance_for(self, quantize: str) -> dict[str, tuple[float, float]]:
        return self.tolerances["none" if quantize == "none" else "quantized"]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        d.pop("input_kind")  # the architecture's, which the hash has
        # left out at their defaults: the content hash (and every run id and model key) of an image classifier
        # reads as it did before models had tasks and signatures
        if self.task == "classification":
            d.pop("task")
        for unset in ("scored_output", "input_name"):
            if not d[unset]:
                d.pop(unset)
        if self.signature is None:
            d.pop("signature")
        else:
            d["signature"] = self.signature.to_json()
        return d

    def content_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()


# The sections a manifest may have (models/*.toml)
SECTIONS = ("model", "data", "preprocess", "train", "expect", "tolerance")


class _Reader:
    """Typed field access that names the file and field on every error."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data

    def fail(self, fld: str, problem: str) -> SpecError:
        return SpecError(f"{self.path}: field '{fld}' {problem}")

    def get(self, dotted: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                if default is ...:
                    raise self.fail(dotted, "is missing")
                return default
            node = node[part]
        if kind is float and isinstance(node, int) and not isinstance(node, bool):
            node = float(node)
        if not isinstance(node, kind) or isinstance(node, bool) and kind is not bool:
            name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self.fail(dotted, f"must be {name}, got {node!r}")
        return node

    def choice(self, dotted: str, allowed: tuple[str, ...], default: Any = ...) -> str:
        v = self.get(dotted, str, default)
        if v not in allowed:
            raise self.fail(dotted, f"is {v!r}; expected one of {', '.join(allowed)}")
        return v

    def numbers(self, dotted: str, length: int | None = None, default: Any = ...) -> tuple[float, ...]:
        v = self.get(dotted, list, default)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            raise self.fail(dotted, f"must be a list of numbers, got {v!r}")
        if length is not None and len(v) != length:
            raise self.fail(dotted, f"must have {length} numbers, got {len(v)}")
        return tuple(float(x) for x in v)


def parse_spec(path: Path) -> ModelSpec:
    """A model manifest (TOML) as a checked ModelSpec; every mistake a one-line SpecError naming the field.

    Long: every field of the manifest checked in the order a reader meets them in the file."""
    import tomllib  # its parser compiles its expressions at import (6 ms): loaded when a manifest is read

    path = Path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: manifest not found") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, not a manifest file") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 text (byte {e.start}); save the manifest as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML ({e}); fix the syntax") from None
    r = _Reader(path, data)
    unknown = [k for k in data if k not in SECTIONS]
    if unknown:
        import difflib

        near = difflib.get_close_matches(unknown[0], SECTIONS, n=1)
        raise r.fail(unknown[0], "is not a section of a manifest" + (f" (did you mean [{near[0]}]?)" if near else "")
                     + f"; sections are {', '.join(SECTIONS)}")
    name = r.get("model.name", str)
    try:
        check_name(name, "model.name")
    except WorkspaceError:
        raise r.fail("model.name", f"is {name!r}; use 1-64 letters, digits, '.', '_' or '-' starting with a "
                                   "letter or digit (it names folders and runs)") from None
    arch = r.get("model.architecture", str)
    from deploytool.zoo.plans import ARCHITECTURES, input_kind_of  # a manifest names a zoo architecture

    if arch not in ARCHITECTURES:
        raise r.fail("model.architecture", f"is {arch!r}; known architectures: {', '.join(ARCHITECTURES)}")
    frameworks = tuple(r.get("model.frameworks", list, ["keras", "torch"]))
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise r.fail("model.frameworks", f"names {fw!r}; expected any of {', '.join(FRAMEWORKS)}")
    shape = r.numbers("data.input_shape", 3)
    if any(s <= 0 or s != int(s) for s in shape):
        raise r.fail("data.input_shape", "must be three positive integers [height, width, channels]")
    channels = int(shape[2])
    labels = tuple(str(x) for x in r.get("data.labels", list))
    if len(labels) < 2:
        raise r.fail("data.labels", "must list at least two class names")
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise r.fail("data.labels", f"names {', '.join(map(repr, dupes))} more than once; class names must differ")
    mean = r.numbers("preprocess.mean", None, [0.0])
    std = r.numbers("preprocess.std", None, [1.0])
    for fld, v in (("preprocess.mean", mean), ("preprocess.std", std)):
        if len(v) not in (1, channels):
            raise r.fail(fld, f"must have 1 or {channels} values (one per channel)")
    if any(s == 0 for s in std):
        raise r.fail("preprocess.std", "must not contain 0")
    scale = r.get("preprocess.scale", float, 1.0)
    for fld, v in (("preprocess.mean", mean), ("preprocess.std", std), ("preprocess.scale", (scale,))):
        if not all(math.isfinite(x) for x in v):
            raise r.fail(fld, f"must be finite numbers, got {list(v)}")
    if scale == 0:
        raise r.fail("preprocess.scale", "must not be 0 (every pixel would become the same value)")
    train = TrainSpec(
        epochs=r.get("train.epochs", int),
        batch_size=r.get("train.batch_size", int),
        optimizer=r.choice("train.optimizer", OPTIMIZERS),
        learning_rate=r.get("train.learning_rate", float),
        seed=r.get("train.seed", int),
        schedule=r.choice("train.schedule", SCHEDULES, "constant"),
    )
    if train.epochs < 1 or train.batch_size < 1 or not (math.isfinite(train.learning_rate)
                                                         and train.learning_rate > 0):
        raise r.fail("train", "epochs, batch_size and learning_rate must be positive finite numbers")
    acc = r.numbers("expect.accuracy", 2)
    if not 0 <= acc[0] <= acc[1] <= 1:
        raise r.fail("expect.accuracy", "must be [low, high] with 0 <= low <= high <= 1")
    tolerances = {g: dict(v) for g, v in DEFAULT_TOLERANCES.items()}
    for group, metrics in r.get("tolerance", dict, {}).items():
        if group not in TOLERANCE_GROUPS:
            raise r.fail(f"tolerance.{group}", f"is unknown; groups are {', '.join(TOLERANCE_GROUPS)}")
        if not isinstance(metrics, dict):
            raise r.fail(f"tolerance.{group}", f"must be a table of metric = [pass, fail], got {metrics!r}")
        for metric in metrics:
            if metric not in TOLERANCE_METRICS:
                raise r.fail(f"tolerance.{group}.{metric}", f"is unknown; metrics are {', '.join(TOLERANCE_METRICS)}")
            pair = r.numbers(f"tolerance.{group}.{metric}", 2)
            problem = tolerance_problem(metric, pair)
            if problem:
                raise r.fail(f"tolerance.{group}.{metric}", problem)
            tolerances[group][metric] = (pair[0], pair[1])
    return ModelSpec(
        name=name,
        architecture=arch,
        frameworks=frameworks,
        dataset=r.choice("data.dataset", DATASETS),
        input_shape=(int(shape[0]), int(shape[1]), channels),
        layout=r.choice("data.layout", LAYOUTS, "NHWC"),
        labels=labels,
        preprocess=Preprocess(scale, mean, std),
        train=train,
        expected_accuracy=(acc[0], acc[1]),
        tolerances=tolerances,
        description=r.get("model.description", str, ""),
        source=str(path),
        input_kind=input_kind_of(arch).name,
    )


def manifest_paths(models_dir: Path = MODELS_DIR) -> list[Path]:
    return sorted(Path(models_dir).glob("*.toml"))


def load_spec(name_or_path: str, models_dir: Path = MODELS_DIR) -> ModelSpec:
    """A manifest by model name (models/<name>.toml) or by path to a .toml file."""
    p = Path(name_or_path)
    if p.suffix == ".toml":
        return parse_spec(p)
    candidate = Path(models_dir) / f"{name_or_path}.toml"
    if candidate.exists():
        return parse_spec(candidate)
    known = ", ".join(x.stem for x in manifest_paths(models_dir)) or "(none)"
    raise UnknownModel(f"unknown model {name_or_path!r}: known models are {known} "
                       f"(see `deploytool models`), or pass a model file or a .toml manifest")
