"""Command line: parses arguments into library calls and prints what they
return. No measurement or decision lives here, and nothing heavy is imported
at module level, so `deploytool --help` stays fast. Every user mistake arrives
as a DeploytoolError and leaves as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, NoReturn

from deploytool import __version__
from deploytool.commands.common import common_args, examples, model_args, run_id_arg
from deploytool.errors import DeploytoolError, UnknownOption
from deploytool.run.flags import (
    format_words,
    non_negative_int,
    positive_int,
    positive_seconds,
    quantize_words,
    target_words,
    user_model_args,
)
from deploytool.targets import target_flags


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (`deploytool: error: ...`) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"deploytool: error: {self.prog.removeprefix('deploytool ')}: {message}; "
              f"see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(2)


def build_parser(studies: bool = True) -> argparse.ArgumentParser:
    """The whole command line. `studies=False` leaves out `study NAME`'s parsers, for a command line that does not
    run a study; `study` is still listed in --help.

    Long: a declarative table of every command's flags, read top to bottom; helpers per command group would
    scatter the one place a reader looks for a flag."""
    parser = _Parser(
        prog="deploytool",
        description="Migrate and quantize a model (TFLite, TF.js, ONNX), run the same test set on the host, "
                    "in headless Chromium and on Android, and compare with the PC baseline.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples("deploytool migrate --model lenet5 --target host --format all --quantize all"),
    )

    parser.add_argument("--version", action="version", version=f"deploytool {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str, *lines: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, epilog=examples(*lines),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        common_args(p)
        return p

    add("models", "list the model manifests in models/", "deploytool models")

    p = add("train", "train a model of the zoo on the PC (cached: the same inputs never retrain)",
            "deploytool train --model lenet5 --framework keras",
            "deploytool train --model resnet20 --framework torch --data-dir ~/data/cifar-10-batches-py")
    model_args(p, "all")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="intra-op and inter-op threads for both frameworks (default: 1; changes the cache key)")

    p = add("baseline", "measure the PC baseline: accuracy, latency, throughput, memory, size (trains if needed)",
            "deploytool baseline --model lenet5 --framework torch")
    model_args(p, "all")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="threads for training and for the baseline run, the same in both frameworks (default: 1)")
    p.add_argument("--latency-samples", type=positive_int, default=None, help="samples timed at batch 1 (default: all)")
    p.add_argument("--warmup", type=non_negative_int, default=10, help="warm-up inferences before timing (default: 10)")

    p = add("migrate", "convert/quantize, run on the targets, compare with the PC baseline, store, report",
            "deploytool migrate --model lenet5 --target host --format tflite --quantize int8",
            "deploytool migrate --model lenet5 --target host,web --format all --quantize all",
            "deploytool migrate --target android --quantize int8 --device emulator-5554 --delegate xnnpack",
            "deploytool migrate --target host --format tflite --runtime litert,tensorflow-lite")
    model_args(p, "all")
    p.add_argument("--target", default="host", help=f"{target_words()} (comma-separated, or all; default: host)")
    p.add_argument("--format", default="all", help=f"{format_words()} (comma-separated, or all; default: all)")
    p.add_argument("--quantize", default="all",
                   help=f"{quantize_words()} (comma-separated, or all: every mode each format has)")
    user_model_args(p)

    for target in target_flags():
        target.add_cli_options(p)  # each target's own flags (--backend, --device, --delegate, ...)
    p.add_argument("--runtime", default="",
                   help="which runtime where a target offers several for a format, e.g. litert,tensorflow-lite "
                        "(comma-separated, or all: side by side; default: each target's default)")
    p.add_argument("--threads", type=positive_int, default=1, help="inference threads on every runtime (default: 1)")
    p.add_argument("--warmup", type=non_negative_int, default=10, help="warm-up inferences before timing (default: 10)")
    p.add_argument("--latency-samples", type=positive_int, default=None, help="samples timed at batch 1 (default: all)")
    p.add_argument("--test-samples", type=positive_int, default=None,
                   help="use only the first N test samples (default: all)")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds one combination may run (default: 600)")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=PASS[,FAIL]",
                   help="override a manifest tolerance, e.g. agreement=0.99,0.97 or accuracy_drop_points=1,2")
    p.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace, or $DEPLOYTOOL_DB)")
    p.add_argument("--run-id", type=run_id_arg, default=None,
                   help="name the run: letters, digits, '.', '_', '-' (default: derived from the request, so a re-run resumes)")
    p.add_argument("--fresh", action="store_true", help="measure everything again as a new run")
    p.add_argument("--localize", action="store_true",
                   help="for each failing row, find the first layer where it goes wrong (cuts the model layer by layer)")

    p = add("localize", "find the layer where a failing row of a stored run goes wrong; adds a minimal reproducer to its bug bundle",
            "deploytool localize lenet5-3f2a9c1b7d4e", "deploytool localize lenet5-3f2a9c1b7d4e --row 'tflite/dynamic on web'")
    p.add_argument("run", help="a run id (or a unique prefix) from `deploytool report --list`")
    p.add_argument("--row", default=None, help="only rows whose label contains this text (default: every failing row)")
    p.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace)")

    p = add("report", "write (again) the HTML, JSON, Markdown and JUnit report of a stored run, or export its rows",
            "deploytool report lenet5-3f2a9c1b7d4e", "deploytool report --list",
            "deploytool report lenet5-3f2a9c1b7d4e --format csv > rows.csv",
            "deploytool report lenet5-3f2a9c1b7d4e --format parquet --output rows.parquet")
    p.add_argument("run", nargs="?", help="a run id (or a unique prefix) from `deploytool report --list`")
    p.add_argument("--list", action="store_true", help="list stored runs")
    p.add_argument("--format", choices=["html", "csv", "parquet"], default="html", dest="export",
                   help="html (default): write the report's files again; csv: the rows, one line each (the Python "
                        "API's Row.flat columns), on stdout or --output; parquet: the same rows into --output "
                        "(needs pyarrow)")
    p.add_argument("--output", type=Path, default=None, metavar="FILE",
                   help="csv/parquet: the file to write (csv default: stdout; parquet default: rows.parquet in the "
                        "run's report folder)")
    p.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace)")

    p = add("findings", "distinct conversion/runtime bugs across runs: each triaged (upstream, unsupported, "
            "environment) and, when its bare reproducer shows it, confirmed with an upstream issue.md",
            "deploytool findings", "deploytool findings --state confirmed", "deploytool findings --class unsupported",
            "deploytool findings show 3f2a9c", "deploytool findings export 3f2a9c ./to-file",
            "deploytool findings --format json")
    p.add_argument("action", nargs="?", choices=["list", "show", "export"], default="list",
                   help="list (default), show ID, or export ID DIR")
    p.add_argument("id", nargs="?", help="a finding id (or a unique prefix) from `deploytool findings`")
    p.add_argument("dir", nargs="?", type=Path, help="export: the folder to write issue.md and the bundle into")
    p.add_argument("--class", dest="klass", choices=["upstream", "unsupported", "environment"], default=None,
                   help="list only findings of this triage class")
    p.add_argument("--state", choices=["confirmed", "candidate", "not-reproduced", "unconfirmed", "coverage-gap"],
                   default=None, help="list only findings in this state (confirmed: its bare reproducer shows it)")
    p.add_argument("--format", choices=["text", "json"], default="text", dest="output", help="output format")
    p.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace)")

    p = add("lab", "the device lab on Dask: run a night of a lab file, start a worker, list nights",
            "deploytool lab run examples/lab.toml", "deploytool lab run lab.toml --scheduler tcp://lab1:8786 --night 2026-12-03",
            "deploytool lab worker --scheduler tcp://lab1:8786", "deploytool lab history --format json",
            "deploytool lab history --format csv > nights.csv")
    p.add_argument("action", choices=["run", "worker", "history"], help="run LAB.toml, worker, or history")
    p.add_argument("lab", nargs="?", type=Path, help="run: the lab file (see examples/lab.toml)")
    p.add_argument("--night", type=run_id_arg, default=None, help="run: name the night (default: today's date; the same "
                   "name resumes it)")
    p.add_argument("--scheduler", default=None, help="a Dask scheduler tcp://HOST:8786 (default: an embedded "
                   "LocalCluster with this machine's host, Chromium and phones)")
    p.add_argument("--name", default=None, help="worker: its name (default: this host's name)")
    p.add_argument("--connect-timeout", type=positive_seconds, default=30.0,
                   help="worker: seconds to reach the scheduler before giving up with exit 2 (default 30)")
    p.add_argument("--retry", action="store_true",
                   help="worker: keep trying to reach the scheduler for as long as it takes (a service's way)")
    p.add_argument("--no-worker-timeout", type=positive_seconds, default=None,
                   help="run: seconds a cell waits for a worker with its resource before it is `no_worker` (default 30)")
    p.add_argument("--format", choices=["text", "json", "csv"], default="text", dest="output",
                   help="history: output format (csv: one line per night, its summary's counts as columns)")
    p.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace)")

    p = add("atlas", "real architectures (keras.applications, torchvision, transformers) with random weights, "
            "each migrated on every route and quantization; one grid of architecture x route (atlas.html)",
            "deploytool atlas --tier quick", "deploytool atlas --list",
            "deploytool atlas --arch torchvision,bert --target host --quantize none,int8",
            "deploytool atlas --tier full --arch audio", "deploytool atlas --page")
    p.add_argument("--tier", choices=["quick", "full"], default="quick",
                   help="quick: reduced widths and inputs, 16 samples (2-core machine: under an hour); full: the sizes "
                        "users ship (a night)")
    p.add_argument("--arch", action="append", default=None, metavar="NAMES",
                   help="architectures, providers (keras, torchvision, transformers) or families (vision-cnn, "
                        "vision-transformer, text-encoder, audio, decoder), comma-separated (default: all)")
    p.add_argument("--list", action="store_true", help="list the architectures with their sizes and test sets")
    p.add_argument("--page", action="store_true", help="write atlas.html again from the store (the last run of --tier)")
    p.add_argument("--target", default="host,web", help=f"{target_words()} (comma-separated; default: host,web)")
    p.add_argument("--format", default="all", help="formats (default: all each source has)")
    p.add_argument("--quantize", default="all", help="quantizations (default: all each format has)")
    for target in target_flags():
        target.add_cli_options(p)
    p.add_argument("--latency-samples", type=positive_int, default=None,
                   help="samples timed at batch 1 (default: 5 in the quick tier, all in the full one)")
    p.add_argument("--warmup", type=non_negative_int, default=None,
                   help="warm-up inferences (default: 1 in the quick tier, 10 in the full one)")
    p.add_argument("--timeout", type=positive_seconds, default=900.0,
                   help="seconds one combination may run (default: 900)")
    p.add_argument("--fresh", action="store_true", help="measure every architecture again as new runs")
    p.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace)")

    add("devices", "list attached Android devices with their facts and whether each is ready", "deploytool devices")

    p = add("study", "the seed studies, each a run in the store: " + (", ".join(_study().study_names()) if studies
                                                                      else "`deploytool study --help` lists them"),
            "deploytool study NAME --help")
    if studies:
        _study().add_parsers(p)
    return parser


def command_of(argv: list[str]) -> str | None:
    """The command an argument list names: its first word that is not an option (the top level has only
    options without values: -h, --version)."""
    return next((a for a in argv if not a.startswith("-")), None)


# The commands. Each one's machinery lives in deploytool/commands/ and is imported (a plain import, which
# import-linter and mypy see) only when that command runs: `deploytool --help` loads none of them, and
# `deploytool migrate` loads neither the lab, the studies nor localize.
COMMANDS = ("models", "train", "baseline", "migrate", "report", "localize", "findings", "lab", "atlas", "devices",
            "study")


def handler(command: str) -> Callable[[argparse.Namespace], int]:
    """The function that runs `command`, its module imported now."""
    if command in ("models", "train", "baseline"):
        from deploytool.commands import models

        return {"models": models.models, "train": models.train_command, "baseline": models.baseline}[command]
    if command in ("migrate", "report"):
        from deploytool.commands import runs

        return runs.migrate_command if command == "migrate" else runs.report
    if command == "localize":
        from deploytool.commands import localize

        return localize.run
    if command == "findings":
        from deploytool.commands import findings

        return findings.run
    if command == "lab":
        from deploytool.commands import lab

        return lab.run
    if command == "atlas":
        from deploytool.commands import atlas

        return atlas.run
    if command == "devices":
        from deploytool.commands import devices

        return devices.run
    if command == "study":
        return _study().run
    raise UnknownOption(f"unknown command {command!r}; commands are {', '.join(COMMANDS)}")


def _study() -> Any:
    """deploytool.commands.study, imported when a parser lists or builds the studies."""
    from deploytool.commands import study

    return study


def _interrupt_on_signals() -> None:
    """Ctrl-C (SIGINT) and `kill` (SIGTERM) end a command as interrupted (runs and nights are marked so, results
    kept, exit 130). SIGINT is armed even when this process was started with it ignored — a background job of a
    non-interactive shell, a CI runner or a supervisor hands that on, and Python then installs no handler, so a
    deliberate SIGINT would be lost and a night would run on to the end."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    _interrupt_on_signals()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(studies=command_of(argv) in (None, "study"))  # top-level --help lists the studies
    except DeploytoolError as e:  # a plugin named in $DEPLOYTOOL_PLUGINS that does not import
        print(f"deploytool: error: {e}", file=sys.stderr)
        return e.exit_code
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow errors that matter raise; its log lines are noise here
    import warnings

    # Deprecation notices from inside TensorFlow/PyTorch/converters are not the user's to act on.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        return handler(args.command)(args)
    except DeploytoolError as e:
        print(f"deploytool: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("deploytool: interrupted; results measured so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
