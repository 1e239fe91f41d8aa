"""The command-line flags a migrate request shares with the commands that build one (migrate, the studies):
argparse types that refuse what cannot be meant (a thread count of 0, a NaN scale) with a one-line usage
error, the flags of a user's own model file with their reading into `MigrateRequest` fields, and the lists of
targets, formats and quantizations that help texts name, read from their registries."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Callable

from deploytool import tasks
from deploytool.convert import FORMATS, QUANTIZE_WORDS
from deploytool.errors import UnknownOption
from deploytool.targets import selectable


def number(kind: type, minimum: float, what: str, allow_equal: bool = True) -> Callable[[str], Any]:
    """An argparse type: a finite number of `kind` at least (or above) `minimum`."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value) or value < minimum or (not allow_equal and value == minimum):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


positive_int = number(int, 1, "a whole number >= 1")
non_negative_int = number(int, 0, "a whole number >= 0")
positive_seconds = number(float, 0.0, "a positive number of seconds", allow_equal=False)


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite non-zero number")
    return value


def floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UnknownOption(f"{flag} {text!r}: expected numbers separated by commas, e.g. 0.485,0.456,0.406") from None
    if not all(math.isfinite(v) for v in values) or (flag == "--std" and 0 in values):
        raise UnknownOption(f"{flag} {text!r}: expected finite numbers" + (", none of them 0" if flag == "--std" else ""))
    return values


def user_model_args(p: argparse.ArgumentParser) -> None:
    """The flags of a user's own model file (migrate, study robustness): its test set and what the model cannot tell."""
    p.add_argument("--data", type=Path, default=None,
                   help="your own test set: .npz with x (one input: images (N,H,W,C), sequences, features, token ids) "
                        "or one array per model input named after it; y (N,) optional: integer labels, float "
                        "targets, or none (judged against the PC baseline's outputs)")
    p.add_argument("--task", choices=tasks.names(), default=None,
                   help="what the model's first output is judged as (default: integer labels mean classification, "
                        "float labels regression; without labels, class scores mean classification, else raw; "
                        "a plugin in $DEPLOYTOOL_PLUGINS may register more)")
    p.add_argument("--output", default=None, metavar="NAME",
                   help="the output a classifier is scored on (default: the first float output of per-class scores, "
                        "e.g. `probabilities` beside an integer `label`); every output is still compared")
    p.add_argument("--random-weights", action="store_true",
                   help="the model's weights are random (an untrained export): a quantized row whose outputs drift "
                        "from the baseline's is noted as what quantizing random weights does, not filed as a finding")
    p.add_argument("--data-layout", choices=["NHWC", "NCHW"], default=None,
                   help="how --data stores x (default: NHWC, or NCHW when the model is NCHW and only that fits)")
    p.add_argument("--layout", choices=["NHWC", "NCHW"], default=None, help="a model file's input layout, when it cannot be read from the model")
    p.add_argument("--labels", default=None, help="a model file's class names, comma-separated (default: 0..C-1)")
    p.add_argument("--scale", type=finite_float, default=1.0, help="a model file's preprocessing: x = (pixel*scale - mean)/std (default 1)")
    p.add_argument("--mean", default="0", help="per-channel mean, comma-separated (default 0)")
    p.add_argument("--std", default="1", help="per-channel std, comma-separated (default 1)")


def user_model_fields(args: argparse.Namespace) -> dict[str, Any]:
    """MigrateRequest's fields from user_model_args' flags."""
    return dict(test_npz=args.data, layout=args.layout, data_layout=args.data_layout,
                labels=tuple(x.strip() for x in args.labels.split(",")) if args.labels else (),
                scale=args.scale, mean=floats(args.mean, "--mean"), std=floats(args.std, "--std"), task=args.task,
                output=getattr(args, "output", None), random_weights=bool(getattr(args, "random_weights", False)))


def target_words() -> str:
    """The targets `--target` offers, for a help text: "host, web, android"."""
    return ", ".join(selectable())


def format_words(notes: bool = True) -> str:
    """The format words `--format` takes, for a help text, each with its note when `notes`."""
    return ", ".join(f.word + (f" ({f.help})" if notes and f.help else "") for f in FORMATS.values())


def quantize_words() -> str:
    """The quantization words `--quantize` takes, for a help text."""
    return ", ".join(QUANTIZE_WORDS)
