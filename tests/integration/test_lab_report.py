"""The HTML lab report over stored nights of the lab's runtime test double: the
nights x cells matrix (regressions first), a trend plot per cell with one point
per night and an IQR band around p50, and links to each night's run report and
bug bundle that resolve to files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import lab_double

LAB = """
[lab]
name = "r"
latency_samples = 60
report_nights = 14

[[models]]
name = "lenet5"
frameworks = ["keras"]

[matrix]
formats = ["tflite"]
quantize = ["none"]
targets = ["host"]
runtimes = ["lab-double"]
threads = [1, 2]
"""


@pytest.fixture
def double():
    lab_double.register()
    lab_double.KNOBS.update(slower=1.0, flips=0, seed=0, only_threads=0)
    yield lab_double.KNOBS
    lab_double.KNOBS.update(only_threads=0)
    lab_double.unregister()


def test_lab_report_matrix_trends_and_links(double, lenet5_workspace, tmp_path):
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import Store

    ws, *_ = lenet5_workspace
    (tmp_path / "lab.toml").write_text(LAB)
    lab = load_lab(tmp_path / "lab.toml")
    store = Store(f"sqlite:///{tmp_path / 'lab.db'}")
    for name in ("n1", "n2"):
        run_night(lab, ws, store, name, progress=False, log=lambda s: None)
    double.update(slower=1.3, flips=100, only_threads=2)  # one cell of two regresses, and fails (a bug bundle)
    out = run_night(lab, ws, store, "n3", progress=False, log=lambda s: None)
    assert [j.result.environment["lab_label"] for j in out.alerts] == ["lenet5 keras->tflite/none on host[lab-double] x2t"]

    page = out.paths.html.read_text()
    matrix = page.split('<section id="matrix">')[1].split("</section>")[0]
    rows = matrix.split('<tr class="cell">')[1:]
    assert len(rows) == 2 and all(len(re.findall(r'<td class="m o-', r)) == 3 for r in rows)  # 2 cells x 3 nights
    assert "x2t" in rows[0] and rows[0].count("o-regression") == 1 and "o-regression" not in rows[1]
    assert 'title="night n3: regression; accuracy' in rows[0]

    trends = page.split('<section id="trends">')[1].split("</section>")[0].split('<div class="trend"')[1:]
    assert len(trends) == 2
    for t in trends:
        p50 = next(svg for svg in t.split("<svg")[1:] if "p50 ms (band" in svg)
        assert p50.count('class="pt"') == 3 and p50.count('class="band"') >= 1

    folder = out.paths.html.parent
    links = re.findall(r'href="([^"#]+)', matrix)
    assert sum("/report.html" in h for h in links) == 6 and sum(h.endswith("README.md") for h in links) == 1
    assert all((folder / h).resolve().is_file() for h in links), [h for h in links if not (folder / h).exists()]
    assert any(h.startswith("../lab-r-n1/") for h in links)  # earlier nights' reports, from tonight's folder
    bundle = next(h for h in links if h.endswith("README.md"))
    assert Path(folder / bundle).resolve().parent.parent.name == "bugs"
