"""`deploytool migrate` and `deploytool report`: a migrate request from the flags, its rows as a table in the
terminal (the task's brief columns, as in summary.md), and a stored run's report built again."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from deploytool.commands.common import print_table
from deploytool.errors import UnknownOption
from deploytool.migrate import MigrateRequest, migrate
from deploytool.report import tasks
from deploytool.report.numbers import num
from deploytool.report.table import csv_text, row_of, write_parquet
from deploytool.result import Result
from deploytool.run.compare import parse_tolerance_overrides
from deploytool.run.flags import user_model_fields
from deploytool.run.stored import rebuild_report, stored_results
from deploytool.store import open_store
from deploytool.targets import expand, selectable, target_flags
from deploytool.workspace import Workspace


def _refuse_flags_of_other_targets(args: argparse.Namespace) -> None:
    """A target's own flag (`--backend`, `--device`) with that target not asked for does nothing: a mistake."""
    asked = set(expand((args.target,), selectable(), "target"))
    for t in target_flags():
        given = t.flags_given(args)
        if given and t.name not in asked:
            raise UnknownOption(f"{given[0]} applies to --target {t.name}, which this run does not ask for; add "
                                f"{t.name} to --target or leave {given[0]} out")


def _refuse_more_threads_than_cores(threads: int) -> None:
    cores = os.cpu_count() or 1
    if threads > cores:
        raise UnknownOption(f"--threads {threads}: this machine has {cores} CPU(s); ask for at most {cores} "
                            "(more threads only contend for the same cores)")


def request_of(args: argparse.Namespace) -> MigrateRequest:
    """The migrate request of parsed flags, checked as the command checks them. deploytool.api builds the same
    namespace from Python values and calls this too: one request, one run id, for the CLI and the API."""
    _refuse_flags_of_other_targets(args)
    _refuse_more_threads_than_cores(args.threads)
    return MigrateRequest(
        model=args.model, frameworks=(args.framework,), formats=(args.format,), quantize=(args.quantize,),
        targets=(args.target,), data_dir=args.data_dir, epochs=args.epochs,
        target_options={t.name: opts for t in target_flags() if (opts := t.options_from_cli(args))},
        runtimes=(args.runtime,) if args.runtime else (), threads=args.threads,
        warmup_runs=args.warmup, latency_samples=args.latency_samples, timeout_s=args.timeout,
        tolerances=parse_tolerance_overrides(args.tolerance),
        run_id=args.run_id, fresh=args.fresh, localize=args.localize, limit_test=args.test_samples,
        **user_model_fields(args),
    )


def migrate_command(args: argparse.Namespace) -> int:
    out = migrate(request_of(args), args.workspace, args.db, progress=not args.quiet)
    _print_results(out.results)
    if out.report_paths is not None:
        print(f"report: {out.report_paths.html}")
    bad = out.failing
    print(f"run {out.run_id}: {len(out.results)} combinations, {len(bad)} failing")
    return 1 if bad else 0


def _fmt(v: Any, spec: str, scale: float = 1.0) -> str:
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
                     *(tasks.text_of(c, num(m.get(c.attr))) for c in view.brief),
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


def report(args: argparse.Namespace) -> int:
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
    if args.export != "html":
        return _export_rows(args, run.run_id, stored_results(store, ws, run.run_id), ws)
    results: list[Result] = []
    if run.request.get("study"):  # a study run (deploytool/study/): its points, not rows
        from deploytool.commands import study

        paths = study.rebuild_report(run, ws, store)
    else:
        paths, results = rebuild_report(run, store, ws)
    _print_results(results)
    print(f"report: {paths.html}")
    return 0


def _export_rows(args: argparse.Namespace, run_id: str, results: list[Result], ws: Workspace) -> int:
    """`report RUN --format csv|parquet`: the stored rows as a table, read from the store (no report is written)."""
    rows = [row_of(r) for r in results]
    if args.export == "csv":
        if args.output is None:
            sys.stdout.write(csv_text(rows))
            return 0
        args.output.write_text(csv_text(rows), encoding="utf-8")
    else:
        write_parquet(rows, args.output or ws.report_dir(run_id) / "rows.parquet")
    print(f"rows: {args.output or ws.report_dir(run_id) / 'rows.parquet'}")
    return 0
