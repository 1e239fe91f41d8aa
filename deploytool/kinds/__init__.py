"""The kinds of data a model's input takes, as registered strategies (one module each, as deploytool.tasks keeps
the tasks): tokens, image, sequence, features, and any a plugin registers. A kind holds its inference rule, how the
bundled image datasets become its samples, whether the images' preprocessing applies to it and how PyTorch takes
it (deploytool.kinds.base.InputKind); nothing elsewhere branches on a kind's name. A new kind is one module that
calls `register_kind` when imported (named in $DEPLOYTOOL_PLUGINS outside deploytool); a zoo architecture names
the kind it reads (deploytool.zoo.register_architecture)."""

from __future__ import annotations

from deploytool.errors import UnknownOption
from deploytool.kinds.base import InputKind
from deploytool.kinds.features import Features
from deploytool.kinds.image import Image
from deploytool.kinds.sequence import Sequence
from deploytool.kinds.tokens import Tokens
from deploytool.registry import Registry

KINDS: Registry[InputKind] = Registry("input kind")


def register_kind(kind: InputKind) -> InputKind:
    """Offer `kind` to the zoo's architectures (and to inference, after the kinds registered before it: the
    built-in features claim every float input the others leave, so a plugin's kind is named, never inferred)."""
    if not kind.name:
        raise ValueError("an input kind needs a name")
    if kind.torch_layout not in ("NCHW", "NHWC"):
        raise UnknownOption(f"input kind {kind.name!r}: torch_layout must be NCHW or NHWC, not {kind.torch_layout!r}")
    KINDS.add(kind.name, kind)
    return kind


for _kind in (Tokens(), Image(), Sequence(), Features()):
    register_kind(_kind)


def names() -> tuple[str, ...]:
    return KINDS.names()


def get_kind(name: str) -> InputKind:
    return KINDS.lookup(name)


def infer_kind(dtype: str, shape: tuple[int | None, ...], quantized: bool = False) -> str:
    """The first registered kind that claims an input of numpy dtype `dtype` and `shape` (batch first): integer ids
    are tokens (and masks), a 4-D float tensor an image, 3-D a sequence (N, steps, features), any other float
    tensor features; a quantized integer tensor (scale and zero point) takes floats, so its rank says it as a
    float's does."""
    return next(name for name, kind in KINDS.items() if kind.claims(dtype, shape, quantized))


__all__ = ["KINDS", "InputKind", "get_kind", "infer_kind", "names", "register_kind"]
