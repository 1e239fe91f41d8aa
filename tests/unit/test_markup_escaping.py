"""Text from converters and models (op names, error messages) carrying HTML or Markdown stays text in every
place a person reads it: summary.md, junit.xml, issue.md and the bundle's README (report.html is checked in
test_report.py). A reason inside a fenced block cannot close it, a `|` cannot add a table column."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from deploytool.bugs import findings
from deploytool.bugs.upstream import issue_text
from deploytool.report.markdown import code, fence, prose
from deploytool.store import SqlAlchemyStore
from tests import results as factory
from tests.unit.test_report import make_input

HOSTILE = "op <img src=x onerror=alert(1)>|`x` failed\n````\n# injected heading\n````"


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def test_a_fence_outlasts_any_backtick_run_inside_it():
    lines = fence(HOSTILE)
    assert lines[0] == lines[-1] == "`" * 5 and lines[1:-1] == HOSTILE.splitlines()
    assert fence("plain") == ["```", "plain", "```"]
    assert code("a`b") == "``a`b``" and code("`x") == "`` `x ``"
    assert prose("<b>&|`") == "&lt;b>&amp;\\|'"


def test_summary_md_and_junit_keep_hostile_reasons_as_text(tmp_path):
    from deploytool.report import write_report

    inp = make_input(tmp_path / "d", n_samples=60, n_rows=3, with_history=False)
    inp.results.append(factory.result("run-1", "hostile", "conversion_failed", reason=HOSTILE, model=inp.model))
    paths = write_report(inp, tmp_path / "out")
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "<img" not in md and "# injected" not in md.replace("\\#", "")
    rows = [ln for ln in md.splitlines() if ln.startswith("| ")]
    columns = {len(re.split(r"(?<!\\)\|", ln)) for ln in rows}
    assert len(columns) == 1, rows  # no cell adds a column
    failure = next(ln for ln in md.splitlines() if "conversion_failed" in ln and ln.startswith("- "))
    assert "&lt;img src=x onerror=alert(1)>" in failure
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    messages = [f.get("message", "") + (f.text or "") for f in suite.iter("failure")]
    assert any("<img src=x onerror=alert(1)>|`x` failed" in m for m in messages), messages
    assert paths.html.exists()


def test_issue_md_fences_the_reason_and_inlines_names_as_code(tmp_path):
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'r.db'}")
    row = factory.result("r1", "k", "conversion_failed", reason=HOSTILE)
    (f,) = findings.record_run(store, "r1", [row], {"numpy": "2.1.3"})
    text = issue_text(f, {"reason": HOSTILE}, [])
    block = re.search(r"^(`{3,})\n(.*?)\n\1$", text, flags=re.S | re.M)
    assert block is not None and block.group(2) == HOSTILE  # the whole reason, inside one fence
    assert len(block.group(1)) > _longest_backtick_run(HOSTILE)
    outside = text.replace(block.group(0), "")
    assert "<img" not in outside and "\n# injected" not in outside


def test_the_lab_summary_md_keeps_hostile_labels_hosts_and_reasons_as_text():
    from deploytool.lab.outputs import night_markdown

    change = {"metric": "latency", "outcome": "regression", "detail": HOSTILE}
    rows = [{"label": "m`<img src=x onerror=alert(1)>`->tflite/none", "host": "phone|<b>x</b>", "alert": True,
             "failing": False, "outcome": "regression", "changes": [change], "reason": ""},
            {"label": "ok->onnx/none", "host": "host", "alert": False, "failing": True, "outcome": "failing",
             "changes": [], "reason": HOSTILE},
            {"label": "quiet->onnx/none", "host": "h<i>", "alert": False, "failing": False, "outcome": "same",
             "changes": [{"metric": "latency", "outcome": "unclear", "detail": "a | b <script>"}], "reason": ""}]
    md = night_markdown("lab<script>", "2026-12-04 <b>", {"alerts": 1, "failing": 1, "cells": 3}, rows)
    lines = md.splitlines()
    # every line a person reads is one list item or heading: a reason's newlines and fences cannot open a block
    assert not any(ln.startswith(("#### ", "# ", "````")) for ln in lines) and lines[0].startswith("### ")
    outside_code = re.sub(r"(`+).*?\1", "", md)  # what is left once the code spans are taken out
    assert "<" not in outside_code and "|" not in outside_code.replace("\\|", ""), outside_code
    assert "``m`<img src=x onerror=alert(1)>`->tflite/none``" in md  # a label shown whole, as code
    assert "phone\\|&lt;b>x&lt;/b>" in md and "latency not judged" in md and "a \\| b &lt;script>" in md
