"""A report per task, checked in real headless Chromium on real migrate runs (tests/anymodels.py): a regressor's
report has MAE/RMSE/ΔRMSE/cosine columns, an RMSE-vs-size plot and an RMSE-change plot with a point per measured
row, says its test set holds float targets and shows no accuracy, confusion or flipped-sample section; a
two-output model without labels (raw) has cosine/error columns, both outputs of every row in the outputs table
and a per-output error plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests import anymodels
from tests.conftest import run_cli
from tests.integration.test_report_browser import CHROMIUM_ARGS, _chromium

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tasks")
    anymodels.keras_regression_mlp(d / "price.keras", epochs=5)
    x, y = anymodels.tabular_data(64, seed=9)
    np.savez(d / "price.npz", features=x, y=y)
    anymodels.keras_two_outputs(d / "two.keras")
    np.savez(d / "two.npz", features=np.random.default_rng(3).normal(size=(40, 16)).astype(np.float32))
    out = {}
    for name, model, data in (("regression", "price.keras", "price.npz"), ("raw", "two.keras", "two.npz")):
        r = run_cli("migrate", "--model", str(d / model), "--data", str(d / data), "--target", "host", "--format",
                    "tflite,onnx", "--quantize", "none,dynamic", "--latency-samples", "5", "--warmup", "1",
                    "--workspace", str(d / "ws"), "--quiet", "--run-id", name, "--task", name, cwd=d, timeout=600)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
        out[name] = d / "ws" / "reports" / name / "report.html"
    return out


def _measured(report: Path) -> int:
    doc = json.loads(report.with_name("report.json").read_text())
    return sum(r["status"] == "measured" for r in doc["results"])


def _page_facts(path: Path) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(path.as_uri())
            return page.evaluate("""() => ({
                heads: [...document.querySelectorAll('table.summary thead th')].map(t => t.textContent.trim()),
                task: document.querySelector('table.summary').dataset.task,
                header: document.querySelector('header').innerText,
                nav: [...document.querySelectorAll('nav a')].map(a => a.textContent.trim()),
                sections: [...document.querySelectorAll('section')].map(s => s.id),
                plots: Object.fromEntries([...document.querySelectorAll('#plots svg, #outputs svg')].map(s => [
                    s.querySelector('title').textContent,
                    {points: s.querySelectorAll('.pt:not(.baseline)').length,
                     baselines: s.querySelectorAll('.pt.baseline').length}])),
                outputs: [...document.querySelectorAll('#outputs table tbody tr td:nth-child(2)')]
                    .map(t => t.textContent.trim()),
                outputHeads: [...document.querySelectorAll('#outputs table thead th')].map(t => t.textContent),
                text: document.body.innerText})""")
        finally:
            browser.close()


def test_a_regression_report_speaks_regression(reports):
    facts, measured = _page_facts(reports["regression"]), _measured(reports["regression"])
    assert measured >= 3, "the tiny regressor converts and runs on at least three of four combinations"
    assert facts["task"] == "regression"
    assert {"MAE", "RMSE", "ΔRMSE", "cos min"} <= set(facts["heads"])
    assert not {"accuracy", "Δ pts", "flips"} & set(facts["heads"])
    assert "64 · float targets" in facts["header"] and "RMSE 0." in facts["header"] and "classes" not in facts["header"]
    assert facts["sections"] == ["summary", "plots", "outputs", "provenance"]
    assert not {"Confusion difference", "Flipped samples"} & set(facts["nav"])
    plots = facts["plots"]
    assert plots["RMSE vs model size"] == {"points": measured, "baselines": 1}
    assert plots["ΔRMSE per row"]["points"] == measured
    fits = [t for t in plots if t.endswith("outputs against the PC baseline's")]
    assert len(fits) == measured and all(plots[t]["points"] > 0 for t in fits)
    assert "no measured points" not in facts["text"] and "accuracy vs model size" not in facts["text"]


def test_a_raw_two_output_report_shows_each_output(reports):
    facts, measured = _page_facts(reports["raw"]), _measured(reports["raw"])
    assert measured >= 3
    assert facts["task"] == "raw" and {"cos min", "rel err", "max err"} <= set(facts["heads"])
    assert "accuracy" not in facts["heads"] and "40 · no labels" in facts["header"]
    assert facts["sections"] == ["summary", "plots", "outputs", "provenance"]
    assert sorted(facts["outputs"]) == sorted(["scores", "value"] * measured)  # raw: no output is "scored"
    assert "labels equal" not in facts["outputHeads"]
    assert facts["plots"]["per-output error"]["points"] == 2 * measured
    assert facts["plots"]["cos min vs model size"] == {"points": measured, "baselines": 0}
