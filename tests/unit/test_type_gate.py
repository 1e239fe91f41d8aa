"""The type checker's gate, checked: mypy with the project's configuration (pyproject.toml's [tool.mypy], run by
`make lint` before the tests) reports a deploytool function called with the wrong type — in an annotated function
and, because `check_untyped_defs` is on, in an unannotated one too — refuses a function without annotations
(`disallow_untyped_defs`), and stays quiet on the right call. The
package's own zero errors are `make lint`'s to check: a whole run takes longer than a unit test should."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

CALLER = '''\
from deploytool.workspace import check_name


def annotated() -> None:
    check_name(3, "model")  # line 5: an int where a str goes


def unannotated():
    check_name(b"lenet5", "model")  # line 9: bytes where a str goes


def right() -> str:
    return check_name("lenet5", "model")
'''


def test_mypy_with_the_project_config_reports_a_wrong_argument_type(tmp_path, monkeypatch):
    caller = tmp_path / "caller.py"
    caller.write_text(CALLER)
    monkeypatch.chdir(ROOT)  # deploytool is found where `make lint` runs mypy: the project's root
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                      "--cache-dir", str(tmp_path / "cache"), str(caller)])
    assert status == 1, stdout + stderr
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    by_line = {int(m.group(1)): e for e in errors if (m := re.search(r"caller\.py:(\d+): error:", e))}
    assert sorted(by_line) == [5, 8, 9], stdout
    assert all('"check_name"' in by_line[n] and "[arg-type]" in by_line[n] for n in (5, 9)), stdout
    assert "[no-untyped-def]" in by_line[8], stdout


def test_make_lint_runs_mypy_between_ruff_and_the_import_contracts():
    makefile = (ROOT / "Makefile").read_text()
    lint = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    steps = [line.strip().split()[0] for line in lint.splitlines()[1:] if line.startswith("\t")]
    assert steps == ["$(BIN)/ruff", "$(BIN)/mypy", "PYTHONPATH=."], lint
    # its cache outlives a clean clone (CI's): kept with the test models, not in the clone
    assert '--cache-dir "$(MYPY_CACHE)"' in lint and "MYPY_CACHE ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/deploytool/" in makefile


def test_make_test_runs_the_lint_beside_the_tests_and_fails_when_it_fails():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "$(MAKE) --no-print-directory lint" in recipe and "-m pytest -n 3 --dist loadgroup" in recipe
    assert "wait $$lint; lint_rc=$$?" in recipe and "if [ $$lint_rc -ne 0 ]" in recipe and "exit 1" in recipe
