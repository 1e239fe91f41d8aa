"""`deploytool study NAME`: each study module adds its own flags (deploytool/study/__init__.py) and runs."""

from __future__ import annotations

import argparse

from deploytool.commands.common import common_args, examples, model_args, run_id_arg
from deploytool.store.protocol import ResultStore
from deploytool.store.records import RunRecord
from deploytool.study import STUDIES, get_study
from deploytool.study.base import StudyRun
from deploytool.study.report import StudyReportPaths, write_study_report
from deploytool.workspace import Workspace


def study_names() -> list[str]:
    return list(STUDIES)


def add_parsers(p: argparse.ArgumentParser) -> None:
    """`deploytool study NAME`: each study module adds its own flags (deploytool/study/__init__.py)."""

    sub = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    for name in study_names():
        mod = get_study(name)
        sp = sub.add_parser(name, help=mod.HELP, description=mod.HELP, epilog=examples(*mod.EXAMPLES),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        common_args(sp)
        model_args(sp, "all")
        sp.add_argument("--db", default=None, help="results database URL (default: sqlite in the workspace, or $DEPLOYTOOL_DB)")
        sp.add_argument("--run-id", type=run_id_arg, default=None,
                        help="name the run (default: derived from the request, so running it again resumes)")
        sp.add_argument("--fresh", action="store_true", help="measure everything again as a new run")
        mod.add_cli(sp)


def run(args: argparse.Namespace) -> int:
    return get_study(args.study).run(args)


def rebuild_report(run: RunRecord, ws: Workspace, store: ResultStore) -> StudyReportPaths:
    """`deploytool report RUN` for a study's run: its report again from its stored points."""
    srun = StudyRun.stored(run, ws, store)
    return write_study_report(srun, get_study(srun.study).report(srun))
