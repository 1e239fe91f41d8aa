"""The shape of the package, checked: the layers and the absence of import cycles are import-linter's contracts
(pyproject.toml, run by `make lint`); here, that those contracts really fail on an upward import and on a cycle,
and the rules import-linter cannot state: targets are asked, not named; the report reads rows, never a
Result's insides."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "deploytool"
TARGET_HOMES = ("targets", "runtimes", "devices")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=120)


@pytest.fixture(scope="module")
def lint_copy(tmp_path_factory):
    """The package, the import contracts and the custom contract's module, copied: a place to break imports."""
    root = tmp_path_factory.mktemp("lint")
    shutil.copytree(PKG, root / "deploytool", ignore=shutil.ignore_patterns("__pycache__", "bundled"))
    shutil.copytree(ROOT / "tests" / "lint", root / "tests" / "lint", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests" / "__init__.py").write_text("")
    shutil.copy(ROOT / "pyproject.toml", root)
    return root


@pytest.mark.parametrize("module, line, contract", [
    ("errors.py", "from deploytool import cli\n", "layers"),  # the bottom layer importing the top
    ("run/judge.py", "from deploytool import migrate\n", "layers"),
    ("data/raw.py", "from deploytool import data\n", "cycles between any two modules"),  # a submodule and its __init__
])
def test_the_import_contracts_fail_on_an_upward_import_and_on_a_cycle(lint_copy, module, line, contract):
    assert _lint_imports(lint_copy).returncode == 0, "the copied package must pass before it is broken"
    path = lint_copy / "deploytool" / module
    original = path.read_text()
    try:
        path.write_text(original + line)
        r = _lint_imports(lint_copy)
    finally:
        path.write_text(original)
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout[-2000:]
    broken = r.stdout.split("Broken contracts")[-1]
    assert contract in broken, broken


def test_no_module_outside_targets_runtimes_and_devices_compares_a_target_name():
    from deploytool import targets

    names = "|".join(map(re.escape, targets.names()))
    compare = re.compile(rf"""(==|!=|\bin\b)\s*\(?\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    offenders = []
    for path in _modules():
        rel = path.relative_to(PKG)
        if rel.parts[0] in TARGET_HOMES:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if compare.search(line):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "ask the target instead:\n" + "\n".join(offenders)


def test_the_check_above_would_see_a_comparison():
    from deploytool import targets

    names = "|".join(map(re.escape, targets.names()))
    compare = re.compile(rf"""(==|!=|\bin\b)\s*\(?\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    assert compare.search('if combo.target == "web":') and compare.search("if t in ('android', 'web'):")
    assert not compare.search('opts.setdefault("web", {})')


def test_report_writers_read_rows_not_result_internals():
    # A ReportRow has `artifact` and `environment` too (plain dicts), so those names no longer tell a Result
    # apart; what only a Result has does, and so does importing it.
    for name in ("html.py", "figures.py", "text.py"):
        source = (PKG / "report" / name).read_text()
        for internal in (".comparison", ".measurement", ".details", ".combo.", ".metrics", ".times"):
            assert internal not in source, f"report/{name} reads {internal} of a Result; add it to summary_rows"
        assert not re.search(r"^from deploytool\.result import .*\bResult\b", source, re.M), \
            f"report/{name} imports Result; read ReportRows (summary_rows) instead"
