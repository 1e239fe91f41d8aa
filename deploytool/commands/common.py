"""Flags and output shared by several commands: the common flags, a model's flags, a run id's check, the
examples block of a --help, and the plain-text table the listing commands print."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from deploytool.errors import WorkspaceError
from deploytool.run.flags import positive_int
from deploytool.spec import FRAMEWORKS
from deploytool.workspace import check_name


def run_id_arg(text: str) -> str:
    try:
        return check_name(text, "run id")
    except WorkspaceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def examples(*lines: str) -> str:
    return "example:\n" + "\n".join(f"  {line}" for line in lines)


def common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", type=Path, default=None,
                   help="where models, artifacts, results and reports live (default: ./runs or $DEPLOYTOOL_WORKSPACE)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def model_args(p: argparse.ArgumentParser, framework_default: str = "all") -> None:
    p.add_argument("--model", default="lenet5", help="a model name from `deploytool models`, a .toml manifest, or (migrate) "
                   "your own model: .keras, SavedModel dir, .onnx, .tflite, .pt2 (default: lenet5)")
    p.add_argument("--framework", default=framework_default, choices=[*FRAMEWORKS, "all"],
                   help=f"which twin to use (default: {framework_default})")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="official dataset files (MNIST IDX, CIFAR-10 batches) instead of the bundled data")
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="override the manifest's epochs (changes the cache key)")


def print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    for line in (header, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip())
