"""A report per task (deploytool.report.tasks): which columns, plots and sections a classifier, a classifier on a
test set without labels, a regressor and raw outputs get, and that every writer (the HTML page, summary.md, the
terminal) follows that one view. Rows are judged by the real compare_outputs on small arrays; pages are written
by the real write_report."""

from __future__ import annotations

import contextlib
import io
import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest

from deploytool.commands import runs
from deploytool.report import ReportInput, ReportRow, summary_rows, text, write_report
from deploytool.report.tasks import cells, text_of, view_for, view_of
from deploytool.tasks import TASKS
from deploytool.result import Combo, Result
from deploytool.run.compare import Costs, compare_outputs
from tests import results as factory

N = 48
# (format, quantize, target, backend, output noise, size on disk): two places, so the verdict matrix is drawn
ROWS = (("tflite", "none", "host", "", 0.0, 4000), ("tflite", "dynamic", "host", "", 0.02, 1500),
        ("onnx", "none", "web", "wasm", 0.0, 4200), ("onnx", "dynamic", "web", "wasm", 0.6, 1700))
HOSTILE = "<img src=x onerror=alert(1)>"


def _results(task: str, base: dict[str, np.ndarray], y: np.ndarray | None) -> list[Result]:
    rng = np.random.default_rng(1)
    out = []
    for i, (fmt, quant, target, backend, noise, size) in enumerate(ROWS):
        got = {k: (v + rng.normal(0, noise, v.shape)).astype(np.float32) for k, v in base.items()}
        comp = compare_outputs(got, base, y, {}, task=task, costs=Costs(size_bytes=size),
                               baseline_costs=Costs(size_bytes=9000))
        combo = Combo("keras", fmt, quant, target, backend=backend)
        out.append(factory.result(key=f"k{i}", combo=combo, comparison=comp,
                                  artifact=factory.artifact(fmt=fmt, quantize=quant, size_bytes=size)))
    return out


def _run(task: str, base: dict[str, np.ndarray], y: np.ndarray | None, labels: list[str]) -> ReportInput:
    baseline = {"size_bytes": 9000, "num_samples": N, "latency": {"p50_ms": 0.2},
                "accuracy": float(np.mean(base[next(iter(base))].argmax(1) == y)) if task == "classification"
                and y is not None else None}
    return ReportInput(run_id="r", model="m", dataset="d", run_info={}, results=_results(task, base, y),
                       baselines={"keras": baseline}, labels=labels,
                       y_true=np.zeros(0, int) if y is None else y, images=None)


def classifier(labelled: bool = True) -> ReportInput:
    rng = np.random.default_rng(0)
    scores = rng.normal(0, 1, (N, 4)).astype(np.float32)
    y = scores.argmax(1) if labelled else None
    return _run("classification", {"scores": scores}, y, ["a", "b", "c", "d"])


def regressor() -> ReportInput:
    rng = np.random.default_rng(0)
    value = rng.normal(0, 2, (N, 1)).astype(np.float32)
    return _run("regression", {"value": value}, (value[:, 0] + rng.normal(0, 0.3, N)).astype(np.float32), [])


def raw_two_outputs() -> ReportInput:
    rng = np.random.default_rng(0)
    base = {"embedding": rng.normal(0, 1, (N, 8)).astype(np.float32),
            HOSTILE: rng.normal(0, 1, (N, 1)).astype(np.float32)}
    return _run("raw", base, None, [])


@pytest.mark.parametrize("make, task, heads, size, sections, plots", [
    (classifier, "classification", ["accuracy", "Δ pts", "agree", "flips", "max err"], "accuracy",
     {"confusion", "gallery"}, set()),
    (lambda: classifier(labelled=False), "classification", ["agree", "flips", "cos min", "max err"], "agreement",
     {"gallery"}, set()),
    (regressor, "regression", ["MAE", "RMSE", "ΔRMSE", "cos min", "max err"], "rmse", {"outputs"}, {"fits"}),
    (raw_two_outputs, "raw", ["cos min", "rel err", "max err", "mean err"], "cosine_min", {"outputs"},
     {"per_output"}),
])
def test_each_task_has_its_own_columns_plots_and_sections(make, task, heads, size, sections, plots):
    view = view_of(summary_rows(make()))
    assert view.task == task and [c.head for c in view.columns] == heads
    assert view.size.attr == size and view.sections == sections and view.plots == plots
    assert (view.row_metric is not None) == (task == "regression")
    assert {c.attr for c in view.brief} <= {c.attr for c in view.columns}  # text forms: a subset of the table's


@pytest.mark.parametrize("task, labelled", [("classification", True), ("classification", False),
                                             ("regression", True), ("raw", False)])
def test_a_model_of_several_outputs_shows_each_whatever_its_task(task, labelled):
    one, two = view_for(task, labelled), view_for(task, labelled, outputs=2)
    assert two.sections == one.sections | {"outputs"} and two.plots == one.plots | {"per_output"}
    assert two.columns == one.columns and two.brief == one.brief


def test_an_unknown_task_reads_as_a_classifier_and_no_labels_only_changes_a_classifier():
    assert view_for("detection") == TASKS["classification"].view
    assert view_for("regression", labelled=False) == TASKS["regression"].view
    assert view_for("classification", labelled=False) == TASKS["classification"].unlabelled_view


def _increase(row: ReportRow) -> float:
    assert row.rmse_increase is not None  # a measured regressor's row
    return row.rmse_increase


def test_a_cell_is_marked_when_it_reads_worse_than_the_baseline():
    rows = summary_rows(regressor())
    view = view_of(rows)
    for row in rows:
        delta = dict(zip([c.head for c in view.columns], cells(view, row)))["ΔRMSE"]
        assert delta["value"] == row.rmse_increase
        assert delta["cls"] == ("n neg" if _increase(row) >= 0.005 else "n")  # an RMSE 0.5% higher or more
    assert any(_increase(row) >= 0.005 for row in rows) and any(_increase(row) < 0.005 for row in rows)


def _page(inp: ReportInput, tmp: Path) -> tuple[str, str]:
    paths = write_report(inp, tmp)
    return paths.html.read_text(encoding="utf-8"), paths.markdown.read_text(encoding="utf-8")


def _title(svg: str) -> str:
    title = re.search(r"<title>(.*?)</title>", svg)
    assert title is not None
    return title.group(1)


def _svgs(html: str) -> dict[str, str]:
    """Every SVG of the page by its title."""
    return {_title(s): s for s in re.findall(r"<svg.*?</svg>", html, re.S)}


def _heads(html: str) -> list[str]:
    table = html.split('<table class="summary"')[1].split("</thead>")[0]
    return [re.sub(r"<.*?>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def test_a_regressors_page_speaks_rmse(tmp_path):
    inp = regressor()
    html, md = _page(inp, tmp_path)
    heads = _heads(html)
    assert {"MAE", "RMSE", "ΔRMSE", "cos min"} <= set(heads) and not {"accuracy", "Δ pts", "flips"} & set(heads)
    assert _sections(html) == ["summary", "plots", "outputs", "provenance"]
    svgs = _svgs(html)
    scatter = svgs["RMSE vs model size"]
    assert scatter.count('class="pt"') == len(ROWS) and scatter.count('class="pt baseline"') == 1
    assert svgs["ΔRMSE per row"].count('class="pt"') == len(ROWS)
    assert "no measured points" not in html and "accuracy vs model size" not in html
    # the matrix shows each row's RMSE change; the header the test set's kind and the baseline's RMSE
    rows = summary_rows(inp)
    worst = max(rows, key=_increase)
    assert f"{100 * _increase(worst):+.2f}%".replace("-", "−") in svgs["verdict matrix"]
    assert f"{N} · float targets" in html and f"RMSE {rows[0].baseline_rmse:.4g}" in html
    assert "classes" not in html.split("</header>")[0]
    assert "ΔRMSE = RMSE change against the PC baseline's" in unescape(html)  # the table's legend
    assert "| combination | RMSE | ΔRMSE | MAE | cos min | p50 ms |" in md and f"baseline RMSE keras {rows[0].baseline_rmse:.4g}" in md
    assert "confusion" not in md and "every output" in md


def test_a_classifier_without_labels_is_read_by_agreement_and_its_flips_have_no_true_class(tmp_path):
    inp = classifier(labelled=False)
    rows = summary_rows(inp)
    assert all(r.accuracy is None for r in rows) and any(r.flipped for r in rows)
    html, md = _page(inp, tmp_path)
    assert "accuracy" not in _heads(html) and "agree" in _heads(html)
    assert _sections(html) == ["summary", "plots", "gallery", "provenance"]  # no confusion: rows = true class
    gallery = html.split('<section id="gallery">')[1].split("</section>")[0]
    assert gallery.count('<figure class="flip changed"') == sum(len(r.flipped) for r in rows)
    assert "<span>true " not in gallery and ": true " not in gallery and "no true class" in gallery
    scatter = _svgs(html)["agree vs model size"]
    assert scatter.count('class="pt"') == len(ROWS) and 'class="pt baseline"' not in scatter  # it agrees with itself
    assert f"{N} · no labels · 4 classes" in html
    assert "| combination | agree | flips | cos min |" in md
    cells = [ln.split(" | ")[1:4] for ln in md.splitlines() if ln.startswith("| keras->")]
    assert len(cells) == len(ROWS) and not any("n/a" in c for line in cells for c in line)


def test_raw_outputs_show_each_output_by_name_escaped(tmp_path):
    html, md = _page(raw_two_outputs(), tmp_path)
    assert {"cos min", "rel err", "max err"} <= set(_heads(html)) and "accuracy" not in _heads(html)
    assert _sections(html) == ["summary", "plots", "outputs", "provenance"]
    outputs = html.split('<section id="outputs">')[1].split("</section>")[0]
    assert outputs.count("<td>embedding</td>") == len(ROWS) and HOSTILE not in html
    assert outputs.count("&lt;img src=x onerror=alert(1)&gt;") >= len(ROWS)  # table cells and the plot's legend
    per_output = _svgs(html)["per-output error"]
    assert per_output.count('class="pt"') == 2 * len(ROWS)
    assert "labels equal" not in outputs  # no integer output to compare for equality
    assert f"{N} · no labels" in html and "baseline" not in md.split("\n")[2]
    assert "| combination | cos min | rel err | max err | p50 ms |" in md


@pytest.mark.parametrize("make, heads", [(classifier, ("acc", "Δ pts", "agree", "flips")),
                                         (regressor, ("RMSE", "ΔRMSE", "MAE", "cos min")),
                                         (raw_two_outputs, ("cos min", "rel err", "max err"))])
def test_the_terminal_tables_show_the_same_brief_columns_as_summary_md(make, heads):
    inp = make()
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        runs._print_results(inp.results)
    head = shown.getvalue().splitlines()[0]
    assert re.search(r"target\s+" + r"\s+".join(map(re.escape, heads)) + r"\s+p50 ms", head), head
    rows = summary_rows(inp)
    view = view_of(rows)
    first = shown.getvalue().splitlines()[1]
    assert all(text_of(c, getattr(rows[0], c.attr)) in first for c in view.brief), first
    plain = text.plain_table(rows).splitlines()
    assert re.match(r"combination\s+" + r"\s+".join(map(re.escape, heads)) + r"\s+p50 ms", plain[0]), plain[0]
