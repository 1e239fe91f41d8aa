"""deploytool's Python API, for notebooks and model CI: the CLI's `migrate`, `report`, `findings` and `localize`
as functions that return typed values. It is the CLI's own path: `migrate` turns its arguments into the flags
`deploytool migrate` would parse and builds the request with the same function the command uses
(deploytool.commands.runs.request_of), so the same request gives the same run id, rows and report.json from
either. A model in memory (a `keras.Model`, a `torch.nn.Module`) is first saved into the workspace as the file
the CLI would be given (`.keras`; `.pt2` by torch.export on the test set's first samples); test data given as
arrays is saved as an `.npz`. Nothing is pickled.

Stability: the names in `__all__` and the fields of `Run` and `Row` documented in their docstrings are the public
API; they change only with a note in the README. `Run.results` (the full `deploytool.result.Result`s) and every
module not named here are internal. User mistakes raise `deploytool.errors.DeploytoolError` subclasses
(`UnknownOption`, `DataError`, `BadModelFile`, ...) with the same one-line message the CLI prints.

    from deploytool import api
    run = api.migrate(model, (x_test, y_test), targets=("host", "web"), formats="onnx,tflite")
    run.failing, run.row(format="onnx", target="web").agreement, run.to_pandas()
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from deploytool.api.run import Run
from deploytool.api.sources import data_file, model_file
from deploytool.commands.runs import request_of
from deploytool.errors import DeploytoolError, UnknownOption
from deploytool.report.table import Row
from deploytool.store import Finding, open_store
from deploytool.targets import target_flags
from deploytool.workspace import Workspace

__all__ = ["DeploytoolError", "Finding", "Row", "Run", "findings", "load_run", "localize", "migrate"]

_log = logging.getLogger("deploytool")
Words = str | Sequence[str]


def _words(v: Words | None) -> str:
    """A CLI word list from a string or a sequence: ("onnx", "tflite") -> "onnx,tflite"."""
    if v is None:
        return ""
    return v if isinstance(v, str) else ",".join(str(w) for w in v)


def _numbers(values: Sequence[float] | float) -> str:
    seq = [values] if isinstance(values, (int, float)) else list(values)
    return ",".join(repr(float(v)) for v in seq)  # repr: the float itself, read back exactly


def _tolerance_flags(tolerances: Mapping[str, float | Sequence[float]] | None) -> list[str]:
    """{"agreement": (0.99, 0.97)} -> ["agreement=0.99,0.97"], as `--tolerance` is given."""
    return [f"{metric}={_numbers(limits)}" for metric, limits in (tolerances or {}).items()]


def _target_flags() -> argparse.Namespace:
    """Every target's own flags at their defaults, as `deploytool migrate` parses them with none given."""
    parser = argparse.ArgumentParser(add_help=False)
    for target in target_flags():
        target.add_cli_options(parser)
    return parser.parse_args([])


def cli_args(model: str, data: Path | None, *, targets: Words = ("host",), formats: Words = "all",
             quantize: Words = ("none",), frameworks: Words = "all", runtimes: Words = (),
             backends: Words | None = None, devices: Sequence[str] = (), delegate: str | None = None,
             benchmark_model: str | Path | None = None, tolerances: Mapping[str, Any] | None = None,
             task: str | None = None, output: str | None = None, labels: Sequence[str] = (),
             layout: str | None = None, data_layout: str | None = None, scale: float = 1.0,
             mean: Sequence[float] | float = (0.0,), std: Sequence[float] | float = (1.0,),
             test_samples: int | None = None, latency_samples: int | None = None, warmup: int = 10,
             threads: int = 1, timeout_s: float = 600.0, epochs: int | None = None, data_dir: str | Path | None = None,
             run_id: str | None = None, fresh: bool = False, localize: bool = False) -> argparse.Namespace:
    """The namespace `deploytool migrate` would parse from the equivalent flags (each keyword is the flag of the
    same name: formats is --format, backends --backend, warmup --warmup, timeout_s --timeout ...)."""
    ns = _target_flags()
    ns.backend = _words(backends) if backends is not None else None
    ns.device = list(devices)
    if delegate is not None:
        ns.delegate = delegate
    ns.benchmark_model = Path(benchmark_model) if benchmark_model else None
    ns.model, ns.data = model, data
    ns.target, ns.format, ns.quantize, ns.framework = _words(targets), _words(formats), _words(quantize), \
        _words(frameworks)
    ns.runtime = _words(runtimes)
    ns.tolerance = _tolerance_flags(tolerances)
    ns.task, ns.output, ns.layout, ns.data_layout = task, output, layout, data_layout
    ns.labels = ",".join(labels) if labels else None
    ns.scale, ns.mean, ns.std = float(scale), _numbers(mean), _numbers(std)
    ns.test_samples, ns.latency_samples, ns.warmup, ns.threads = test_samples, latency_samples, warmup, threads
    ns.timeout, ns.epochs, ns.data_dir = float(timeout_s), epochs, Path(data_dir) if data_dir else None
    ns.run_id, ns.fresh, ns.localize = run_id, fresh, localize
    return ns


def migrate(model: Any, data: Any = None, *, targets: Words = ("host",), formats: Words = "all",
            quantize: Words = ("none",), workspace: str | Path | None = None, db: str | None = None,
            name: str | None = None, progress: bool = False, log: Callable[[str], None] | None = None,
            **options: Any) -> Run:
    """Migrate `model` to `formats` x `quantize`, run the test set on `targets`, compare with the PC baseline,
    store and report: `deploytool migrate`, returning the run.

    model: a zoo name ("lenet5"), a manifest or model file path (.keras, SavedModel dir, .onnx, .tflite, .pt2),
        or a `keras.Model` / `torch.nn.Module` (saved into the workspace first; its file's hash is in the run id).
    data: the test set: an .npz path, an array x, a tuple (x, y), or a mapping of named arrays as in an .npz
        (x or one array per input, y, `<input>_train` calibration splits); None: the zoo model's own data.
    targets, formats, quantize, frameworks, runtimes, backends: a word or a sequence of words, as the flags.
    options: every other `deploytool migrate` flag by name — `tolerances={"agreement": (0.99, 0.97)}`,
        `task`, `output`, `labels`, `layout`, `data_layout`, `scale`, `mean`, `std`, `test_samples`,
        `latency_samples`, `warmup`, `threads`, `timeout_s`, `epochs`, `data_dir`, `run_id`, `fresh`, `localize`,
        `devices`, `delegate`, `benchmark_model` (see `cli_args`).
    workspace, db: as --workspace and --db. progress: show the progress bar. log: where progress lines go
        (default: the "deploytool" logger); the test set's pitfall warnings go to that logger as warnings.

    Raises the CLI's typed errors (deploytool.errors) for a user mistake; a combination that fails is a row."""
    from deploytool.migrate import migrate as run_migrate

    unknown = sorted(set(options) - set(cli_args.__kwdefaults__ or {}))
    if unknown:
        raise UnknownOption(f"migrate() got an unknown option {unknown[0]!r}; options are "
                            + ", ".join(sorted(cli_args.__kwdefaults__ or {})))
    ws = Workspace.open(workspace)
    path = model_file(model, data, ws, name)
    args = cli_args(path, data_file(data, ws), targets=targets, formats=formats, quantize=quantize, **options)
    req = request_of(args)
    out = run_migrate(req, ws.root, db, progress=progress, log=log or _log.info, warn=_log.warning)
    html = out.report_paths.html if out.report_paths is not None else None
    return Run.of(out.run_id, req.model, out.results, html, ws, db)


def load_run(run_id: str, workspace: str | Path | None = None, db: str | None = None) -> Run:
    """A stored run by its id (or a unique prefix), as `deploytool report RUN` finds it."""
    from deploytool.run.stored import stored_results

    ws = Workspace.open(workspace, writable=False)
    store = open_store(db, ws.default_db_url)
    record = store.get_run(run_id)
    if record is None:
        raise UnknownOption(f"no stored run {run_id!r}; `deploytool report --list` shows the runs")
    if record.request.get("study"):
        raise UnknownOption(f"run {record.run_id} is a study's, of points, not rows; `deploytool report "
                            f"{record.run_id}` writes its report")
    html = ws.root / "reports" / record.run_id / "report.html"
    model = str(record.request.get("model") or record.model)  # as the request named it, like migrate()'s Run
    return Run.of(record.run_id, model, stored_results(store, ws, record.run_id), html if html.exists() else None,
                  ws, db)


def findings(workspace: str | Path | None = None, db: str | None = None, klass: str | None = None,
             state: str | None = None) -> list[Finding]:
    """The distinct bugs across runs, latest first, as `deploytool findings [--class K] [--state S]` lists them."""
    ws = Workspace.open(workspace, writable=False)
    return [f for f in open_store(db, ws.default_db_url).findings()
            if (klass is None or f.klass == klass) and (state is None or f.state == state.replace("-", " "))]


def localize(run: Run, row: Row | str, log: Callable[[str], None] | None = None) -> Any:
    """Where the failing `row` of `run` goes wrong, as `deploytool localize RUN --row LABEL`: cuts the model (or
    traces a user file op by op) and returns its `deploytool.localize.Localization` (`first_bad`, `table()`).
    The row's bundle gains the smallest failing cut; the run's report is written again."""
    from deploytool.localize import localize_run

    label = row.label if isinstance(row, Row) else row
    ws = Workspace.open(run.workspace)
    store = open_store(run.db, ws.default_db_url)
    record = store.get_run(run.run_id)
    if record is None:
        raise UnknownOption(f"no stored run {run.run_id!r}; `deploytool report --list` shows the runs")
    found = localize_run(record, store, ws, label, log=log or _log.info)
    exact = [loc for result, loc in found if result.combo.label == label]
    return (exact or [found[0][1]])[0]
