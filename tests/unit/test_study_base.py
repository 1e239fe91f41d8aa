"""The study machinery (deploytool/study/base.py, report.py): a study is a resumable run of keyed points in the
store, rendered by `deploytool report RUN` from stored points only."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from deploytool.cli import main
from deploytool.study import STUDIES
from deploytool.study.base import StudyRun, register_study
from deploytool.study.report import Section, Table


@pytest.fixture
def toy_study(monkeypatch):
    """A study module of the documented shape, registered under `toy` (a test double of a real study)."""
    mod: Any = types.ModuleType("toy_study")  # its attributes are set below
    mod.HELP = "a toy study"
    mod.EXAMPLES = ("deploytool study toy",)
    mod.calls = []

    def add_cli(p):
        p.add_argument("--points", type=int, default=3)

    def run(args):
        srun = StudyRun.open("toy", args.model, {"points": args.points}, args.workspace, args.db, args.run_id, args.fresh)
        done = srun.points()
        for i in range(args.points):
            if f"p{i}" not in done:
                mod.calls.append(i)
                srun.save(f"p{i}", {"i": i, "square": i * i})
        from deploytool.study.report import write_study_report

        write_study_report(srun, report(srun))
        srun.finish()
        print(srun.run_id)
        return 0

    def report(srun):
        pts = srun.points()
        return [Section("squares", "Squares", "i against i squared.",
                        tables=(Table(("i", "square"), tuple((p["i"], p["square"]) for p in pts.values())),),
                        data={"n": len(pts)})]

    mod.add_cli, mod.run, mod.report = add_cli, run, report
    monkeypatch.setitem(sys.modules, "toy_study", mod)
    run.__module__ = "toy_study"  # as if `def run` were written in the module
    register_study("toy")(run)  # what `@register_study("toy")` above it does
    yield mod
    STUDIES.unregister("toy")


def test_a_study_resumes_and_reports_from_stored_points(toy_study, tmp_path, capsys):
    ws = tmp_path / "ws"
    assert main(["study", "toy", "--workspace", str(ws), "--points", "3"]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert toy_study.calls == [0, 1, 2]
    assert main(["study", "toy", "--workspace", str(ws), "--points", "3"]) == 0  # same request: resumes, measures nothing
    assert toy_study.calls == [0, 1, 2]
    assert capsys.readouterr().out.strip().splitlines()[-1] == run_id
    assert main(["study", "toy", "--workspace", str(ws), "--points", "4"]) == 0  # a different request: a new run
    assert toy_study.calls == [0, 1, 2, 0, 1, 2, 3]

    (ws / "reports" / run_id / "report.html").unlink()
    assert main(["report", run_id, "--workspace", str(ws)]) == 0
    html = (ws / "reports" / run_id / "report.html").read_text()
    assert "Squares" in html and "<td>4</td>" in html and "Content-Security-Policy" in html
    doc = json.loads((ws / "reports" / run_id / "report.json").read_text())
    assert doc["study"] == "toy" and doc["sections"][0]["data"] == {"n": 3}
    assert doc["sections"][0]["tables"][0]["rows"] == [[0, 0], [1, 1], [2, 4]]
    assert "| 2 | 4 |" in (ws / "reports" / run_id / "summary.md").read_text()


def test_an_unknown_study_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["study", "nonesuch"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
