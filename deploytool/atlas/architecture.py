"""The atlas' noun: an `Architecture` a library builds offline with random weights (keras.applications,
torchvision, transformers), named once with its family, its input kind and two sizes — `full` (the size users
ship) and `quick` (a reduced width and input for the tier that runs on a 2-core machine within the hour). Each
provider module registers its architectures in `ATLAS`; `build` functions run in a child process (deploytool.atlas
.build) and never here, so this module imports no framework."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any, Callable

from deploytool.registry import Registry
from deploytool.value import value

TIERS = ("quick", "full")
FAMILIES = ("vision-cnn", "vision-transformer", "text-encoder", "audio", "decoder")
INPUT_KINDS = ("image", "tokens", "audio-features", "waveform")


@value
class Size:
    """One size of an architecture: the constructor's own arguments (`params`: width, depth, hidden size, ...) and
    the shape of one sample's inputs, and the number of test samples that tier runs."""

    params: dict[str, Any]
    input_shape: tuple[int, ...]  # one sample: (H, W, C) / (C, H, W) for images, (T,) for tokens, (F, T) features
    samples: int = 16


@value
class Architecture:
    name: str  # "keras/mobilenet_v3_small": provider/architecture, unique across providers
    family: str  # FAMILIES
    provider: str  # "keras", "torchvision", "transformers": also the model file it saves (.keras, .pt2)
    input_kind: str  # INPUT_KINDS
    quick: Size
    full: Size
    # build(size) -> the library's model object (keras.Model, torch.nn.Module); runs in deploytool.atlas.build's
    # child process only
    build: Callable[[Size], Any]
    test_set: str = ""  # what the test set is, in words ("smooth random colour fields (normalised)")
    pixels: str = "normalised"  # images: "normalised" (roughly -2.5..2.5) or "0-255" (a model that rescales itself)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def size(self, tier: str) -> Size:
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; tiers are {', '.join(TIERS)}")
        return self.quick if tier == "quick" else self.full


@value
class Built:
    """An architecture built at one tier into the workspace: its model file and test set, and how informative the
    test set is on the model as built (the spread of its outputs across samples after any rescaling)."""

    name: str
    tier: str
    model: Path  # .keras or .pt2
    data: Path  # test.npz: one array per model input
    params: int
    classes_predicted: int  # distinct argmax over the samples (0: not a classifier)
    output_std: float  # mean over output values of their std across samples
    rescaled: str  # how the final layer was rescaled so outputs vary ("" when it was not)
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "model": str(self.model), "data": str(self.data)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Built":
        return cls(**{**d, "model": Path(d["model"]), "data": Path(d["data"])})


ATLAS: Registry[Architecture] = Registry("atlas architecture")


def register(arch: Architecture) -> Architecture:
    if arch.family not in FAMILIES or arch.input_kind not in INPUT_KINDS:
        raise ValueError(f"{arch.name}: family {arch.family!r} / input kind {arch.input_kind!r} unknown")
    ATLAS.add(arch.name, arch)
    return arch
