"""Command line: parses arguments into library calls and prints what they
return. No measurement or decision lives here, and nothing heavy is imported
at module level, so `deploytool --help` stays fast. Every user mistake arrives
as a DeploytoolError and leaves as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, NoReturn

from deploytool import __version__
from deploytool.commands.common import common_args, examples, model_args, print_table, run_id_arg
from deploytool.data import load_dataset
from deploytool.errors import DeploytoolError, UnknownOption
from deploytool.migrate import MigrateRequest, migrate
from deploytool.report import tasks
from deploytool.report.numbers import num
from deploytool.run.baseline import run_baseline
from deploytool.run.compare import parse_tolerance_overrides
from deploytool.run.flags import (
    format_words,
    non_negative_int,
    positive_int,
    positive_seconds,
    quantize_words,
    target_words,
    user_model_args,
    user_model_fields,
)
from deploytool.result import Result
from deploytool.run.stored import rebuild_report
from deploytool.spec import load_spec, manifest_paths, parse_spec
from deploytool.store import open_store
from deploytool.targets import all_targets, expand, selectable
from deploytool.train import train
from deploytool.workspace import Workspace


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

    for target in all_targets():
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

    p = add("report", "write (again) the HTML, JSON, Markdown and JUnit report of a stored run",
            "deploytool report lenet5-3f2a9c1b7d4e", "deploytool report --list")
    p.add_argument("run", nargs="?", help="a run id (or a unique prefix) from `deploytool report --list`")
    p.add_argument("--list", action="store_true", help="list stored runs")
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
            "deploytool lab worker --scheduler tcp://lab1:8786", "deploytool lab history --format json")
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
    p.add_argument("--format", choices=["text", "json"], default="text", dest="output", help="history: output format")
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


def cmd_models(args: argparse.Namespace) -> int:
    rows = []
    for path in manifest_paths():
        s = parse_spec(path)
        lo = s.expected_accuracy[0]
        rows.append((s.name, s.architecture, s.dataset, "x".join(map(str, s.input_shape)), ",".join(s.frameworks),
                     f">= {lo:.0%}", s.description))
    print_table(("model", "architecture", "dataset", "input", "frameworks", "expected", "description"), rows)
    return 0


def _frameworks(spec, choice: str) -> list[str]:
    return list(spec.frameworks) if choice == "all" else [choice]


def _train_all(args: argparse.Namespace):
    spec = load_spec(args.model)
    ws = Workspace.open(args.workspace)
    dataset = load_dataset(spec, args.data_dir)
    results = []
    for fw in _frameworks(spec, args.framework):
        r = train(spec, fw, dataset, ws, epochs=args.epochs, progress=not args.quiet, threads=args.threads)
        if r.cached:
            print(f"{spec.name} [{fw}]: reusing the cached model ({r.key}); nothing to train")
        else:
            per_epoch = sum(r.seconds_per_epoch) / len(r.seconds_per_epoch)
            used = r.provenance.get("threads", {}).get("intra_op_threads", "?")
            print(f"{spec.name} [{fw}]: trained {r.epochs} epochs, {per_epoch:.1f} s/epoch, "
                  f"peak RSS {r.peak_rss_bytes / 2**20:.0f} MiB, CPU {r.cpu_utilisation_percent:.0f}%, "
                  f"{used} intra-op thread(s)")
        lo, hi = spec.expected_accuracy
        flag = "" if lo <= r.test_accuracy <= hi else f"  (outside the expected range {lo:.0%}-{hi:.0%})"
        print(f"  test accuracy {r.test_accuracy:.2%}{flag}; model: {r.get_artifact().path}")
        results.append(r)
    return spec, dataset, results


def cmd_train(args: argparse.Namespace) -> int:
    _train_all(args)
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    spec, dataset, results = _train_all(args)
    rows = []
    for r in results:
        b = run_baseline(spec.name, r.get_artifact(), dataset, warmup_runs=args.warmup,
                         latency_samples=args.latency_samples, threads=args.threads)
        lat = b.latency
        peak = b.memory_bytes.get("process_peak_rss_bytes") or b.memory_bytes.get("process_lifetime_peak_rss_bytes", 0)
        rows.append((f"{spec.name} [{r.framework}]", f"{b.accuracy:.2%}", str(b.num_samples),
                     f"{lat['p50_ms']:.3f}", f"{lat['p90_ms']:.3f}", f"{lat['p99_ms']:.3f}", f"{lat['mean_ms']:.3f}",
                     f"{b.throughput_sps:.0f}" if b.throughput_sps else "-", f"{peak / 2**20:.0f}",
                     f"{b.size_bytes / 1024:.0f}", "cached" if b.cached else "measured"))
    print_table(("PC baseline", "accuracy", "samples", "p50 ms", "p90 ms", "p99 ms", "mean ms", "samples/s",
                  "peak RSS MiB", "size KiB", ""), rows)
    print(f"baseline JSON beside each model in {Path(results[0].get_artifact().path).parent.parent}")
    return 0


def _refuse_flags_of_other_targets(args: argparse.Namespace) -> None:
    """A target's own flag (`--backend`, `--device`) with that target not asked for does nothing: a mistake."""
    asked = set(expand((args.target,), selectable(), "target"))
    for t in all_targets():
        given = t.flags_given(args)
        if given and t.name not in asked:
            raise UnknownOption(f"{given[0]} applies to --target {t.name}, which this run does not ask for; add "
                                f"{t.name} to --target or leave {given[0]} out")


def _refuse_more_threads_than_cores(threads: int) -> None:
    cores = os.cpu_count() or 1
    if threads > cores:
        raise UnknownOption(f"--threads {threads}: this machine has {cores} CPU(s); ask for at most {cores} "
                            "(more threads only contend for the same cores)")


def cmd_migrate(args: argparse.Namespace) -> int:
    _refuse_flags_of_other_targets(args)
    _refuse_more_threads_than_cores(args.threads)
    req = MigrateRequest(
        model=args.model, frameworks=(args.framework,), formats=(args.format,), quantize=(args.quantize,),
        targets=(args.target,), data_dir=args.data_dir, epochs=args.epochs,
        target_options={t.name: opts for t in all_targets() if (opts := t.options_from_cli(args))},
        runtimes=(args.runtime,) if args.runtime else (), threads=args.threads,
        warmup_runs=args.warmup, latency_samples=args.latency_samples, timeout_s=args.timeout,
        tolerances=parse_tolerance_overrides(args.tolerance),
        run_id=args.run_id, fresh=args.fresh, localize=args.localize, limit_test=args.test_samples,
        **user_model_fields(args),
    )
    out = migrate(req, args.workspace, args.db, progress=not args.quiet)
    _print_results(out.results)
    if out.report_paths is not None:
        print(f"report: {out.report_paths.html}")
    bad = out.failing
    print(f"run {out.run_id}: {len(out.results)} combinations, {len(bad)} failing")
    return 1 if bad else 0


def _fmt(v, spec: str, scale: float = 1.0) -> str:
    return "-" if v is None else format(v * scale, spec)


def _print_results(results: list[Result]) -> None:
    """One line per row with its task's brief columns (deploytool.report.tasks, as in summary.md): a
    classifier's accuracy, its change, agreement and flips; a regressor's RMSE, its change against the PC
    baseline, MAE and cosine; raw outputs' cosine and errors."""
    compared = [r.comparison for r in results if r.comparison is not None]
    view = tasks.view_for(compared[0].task if compared else "classification",
                          not compared or any(num(c.accuracy) is not None for c in compared))
    rows = []
    for r in results:
        m = r.metrics
        rows.append((r.combo.framework, r.combo.format, r.combo.quantize, r.combo.where,
                     *(c.fmt(num(m.get(c.attr))) for c in view.brief),
                     _fmt(m.get("p50_ms"), ".3f"), _fmt(m.get("p90_ms"), ".3f"), _ratio_ci(r),
                     _fmt(m.get("size_bytes"), ".0f", 1 / 1024),
                     (str(r.verdict) if r.verdict is not None else f"{r.status}: {r.reason[:70]}")
                     + (f" [{r.triage.klass}]" if r.triage is not None else "")))
    print_table(("framework", "format", "quantize", "target", *(c.head for c in view.brief), "p50 ms", "p90 ms",
                  "×p50", "KiB", "verdict"), rows)
    how = [(r.combo, r.latency_how) for r in results if r.latency_how]
    if how:
        print("latency, how it was measured:")
        for combo, sentence in how:
            print(f"  {combo.framework} {combo.format}/{combo.quantize} {combo.where}: {sentence}")


def _ratio_ci(r: Result) -> str:
    """The row's latency ratio to its PC baseline, with its interval when it was measured paired."""
    c = r.comparison
    if c is None or c.latency_ratio_p50 is None or c.latency_ratio_p50 != c.latency_ratio_p50:
        return "-"
    if c.latency_ratio_ci is None:
        return f"{c.latency_ratio_p50:.3g}"
    return f"{c.latency_ratio_p50:.3g} [{c.latency_ratio_ci[0]:.3g},{c.latency_ratio_ci[1]:.3g}]"


def cmd_report(args: argparse.Namespace) -> int:
    listing = args.list or not args.run
    ws = Workspace.open(args.workspace, writable=not listing)  # a listing only reads
    store = open_store(args.db, ws.default_db_url)
    if listing:
        runs = store.list_runs()
        print_table(("run", "model", "status", "created", "host"),
                     [(r.run_id, r.model, r.status, r.created_at, r.host) for r in runs])
        return 0
    run = store.get_run(args.run)
    if run is None:
        raise UnknownOption(f"no stored run {args.run!r}; `deploytool report --list` shows the runs")
    results: list[Result] = []
    if run.request.get("study"):  # a study run (deploytool/study/): its points, not rows
        paths = _study().rebuild_report(run, ws, store)
    else:
        paths, results = rebuild_report(run, store, ws)
    _print_results(results)
    print(f"report: {paths.html}")
    return 0


# A command's handler: a function here, or "module:function" of deploytool.commands, imported only when that
# command runs (`deploytool migrate` loads neither the lab, the studies nor localize).
COMMANDS: dict[str, Callable[[argparse.Namespace], int] | str] = {
    "models": cmd_models, "train": cmd_train, "baseline": cmd_baseline, "migrate": cmd_migrate,
    "report": cmd_report, "localize": "deploytool.commands.localize:run", "findings": "deploytool.commands.findings:run",
    "lab": "deploytool.commands.lab:run", "devices": "deploytool.commands.devices:run",
    "study": "deploytool.commands.study:run"}


def handler(command: str) -> Callable[[argparse.Namespace], int]:
    ref = COMMANDS[command]
    if not isinstance(ref, str):
        return ref
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def _study() -> Any:
    """deploytool.commands.study, imported when a parser lists or builds the studies."""
    return importlib.import_module("deploytool.commands.study")


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
