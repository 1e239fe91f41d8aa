"""Converters checked against each other: rows of one source, format, quantization and place made by two
converters are paired; the one that departs from the source's own outputs is named, in the finding's title
and in the report's side-by-side table."""

from __future__ import annotations

from dataclasses import replace

from deploytool.bugs import findings
from deploytool.report.pairs import converter_pairs, row_of
from deploytool.result import Combo
from deploytool.store import SqlAlchemyStore
from tests import results as factory

LITERT = Combo("torch", "tflite", "int8", "host")
ONNX2TF = replace(LITERT, format="tflite-onnx2tf")


def _rows(onnx2tf_agreement: float = 0.30, onnx2tf_verdict: str = "fail"):
    right = factory.result("r", "a", combo=LITERT, artifact=factory.artifact(
        framework="torch", converter="litert_torch", converter_version="0.4.0"),
        comparison=factory.comparison(agreement=0.99, accuracy=0.97))
    wrong = factory.result("r", "b", combo=ONNX2TF, artifact=factory.artifact(
        framework="torch", converter="torch.onnx + onnx2tf", converter_version="2.6.0 + 1.29.24"),
        comparison=factory.comparison(agreement=onnx2tf_agreement, accuracy=0.31, verdict=onnx2tf_verdict))
    other_place = factory.result("r", "c", combo=replace(ONNX2TF, quantize="none"))  # no partner: no pair
    return [right, wrong, other_place]


def test_a_failing_converter_departs_when_another_gets_the_same_source_right():
    (pair,) = converter_pairs([row_of(r) for r in _rows()])
    assert (pair.framework, pair.artifact_format, pair.quantize) == ("torch", "tflite", "int8")
    assert [e.converter for e in pair.entries] == ["litert_torch", "torch.onnx + onnx2tf"]
    assert pair.departs == ["torch.onnx + onnx2tf"]
    assert "litert_torch (99.0% agreement) on the same source does not" in pair.sentence
    (close,) = converter_pairs([row_of(r) for r in _rows(0.985, "pass")])
    assert close.departs == [] and close.sentence == ""  # within a point of each other: neither departs
    (apart,) = converter_pairs([row_of(r) for r in _rows(0.95, "pass")])
    assert apart.departs == ["torch.onnx + onnx2tf"]


def test_the_finding_says_which_converter_departs(tmp_path):
    store = SqlAlchemyStore(f"sqlite:///{tmp_path / 'r.db'}")
    (f,) = findings.record_run(store, "r", _rows(), {"numpy": "1"})
    assert f.owner == "PINTO0309/onnx2tf"
    assert "(torch.onnx + onnx2tf departs from the source's outputs; litert_torch" in f.title, f.title


def test_the_report_shows_the_pair_side_by_side(tmp_path):
    from deploytool.report import ReportInput, summary_rows
    from deploytool.report.html import render

    import numpy as np

    y = np.arange(20) % 10
    inp = ReportInput(run_id="r", model="m", dataset="d", run_info={}, results=_rows(), baselines={},
                      labels=[str(i) for i in range(10)], y_true=y, images=np.zeros((20, 8, 8, 1), np.float32),
                      history={})
    html = render(inp, summary_rows(inp))
    table = html.split('<table class="pairs">')[1].split("</table>")[0]
    assert table.count("<tr") == 1 + 2 + 1  # header, the two converters, the sentence
    assert 'class="failing"><td rowspan="2">torch</td>' not in table and '<tr class="failing">' in table
    assert "99.00%" in table and "30.00%" in table and "departs from the source" in table
