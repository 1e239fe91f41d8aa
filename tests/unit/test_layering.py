"""The shape of the package, checked: targets are asked, not named; localize and
migrate do not know each other; the report reads rows, never a Result's insides."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "deploytool"
TARGET_HOMES = ("targets", "runtimes", "devices")


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


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


@pytest.mark.parametrize("module", ["localize", "runner", "context", "judge", "runs", "bugreport"])
def test_only_the_cli_imports_migrate(module):
    assert not any(m == "deploytool.migrate" or m.startswith("deploytool.migrate.")
                   for m in _imports(PKG / f"{module}.py")), f"{module}.py imports migrate"


def test_the_judge_is_pure():
    allowed = {"numpy", "deploytool.run.baseline", "deploytool.run.compare", "deploytool.result", "deploytool.runtimes.base"}
    imported = {m for m in _imports(PKG / "judge.py") if not m.startswith("__future__")}
    assert {m.rsplit(".", 1)[0] if m.rsplit(".", 1)[0] in allowed else m for m in imported} <= allowed | {
        f"{a}.{n}" for a in allowed for n in ("Baseline", "Comparison", "compare", "Measurement", "Outputs")}


def test_report_writers_read_rows_not_result_internals():
    for name in ("html.py", "figures.py", "text.py"):
        source = (PKG / "report" / name).read_text()
        for internal in (".comparison", ".measurement", ".artifact.", ".environment", ".details"):
            assert internal not in source, f"report/{name} reads {internal} of a Result; add it to summary_rows"
