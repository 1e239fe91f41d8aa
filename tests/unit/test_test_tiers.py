"""Every integration test file says its tier (slow, browser, android) in a module-level `pytestmark`, so
`-m "not browser"` and the like select what a machine can run, and no file slips into the fast tier unmarked."""

from __future__ import annotations

import ast
from pathlib import Path

TIERS = {"slow", "browser", "android"}
INTEGRATION = Path(__file__).resolve().parents[1] / "integration"


def _module_marks(path: Path) -> set[str]:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute) and n.attr in TIERS}
    return set()


def test_every_integration_test_file_carries_its_tier_marker():
    files = sorted(INTEGRATION.glob("test_*.py"))
    assert len(files) > 20
    unmarked = [f.name for f in files if not _module_marks(f)]
    assert not unmarked, f"add `pytestmark = pytest.mark.slow` (or browser/android) to: {unmarked}"


def test_no_two_test_files_share_a_name():
    """Test folders are not packages (rootdir-relative imports): two `test_x.py` in different folders make
    pytest refuse the second with "import file mismatch" — in a clean clone, though a warm checkout may pass."""
    from collections import Counter

    names = Counter(p.name for p in INTEGRATION.parent.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], [n for n, k in names.items() if k > 1]
