"""A report per task, checked in real headless Chromium on real migrate runs (tests/anymodels.py): a regressor's
report has MAE/RMSE/ΔRMSE/cosine columns and an RMSE-vs-size plot with measured points and no confusion or
flipped-sample sections; a two-output model without labels (raw) has cosine/error columns, every output in the
outputs table and a per-output error plot."""

from __future__ import annotations

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
                sections: [...document.querySelectorAll('section')].map(s => s.id),
                plots: [...document.querySelectorAll('#plots svg, #outputs svg')].map(s => ({
                    title: (s.querySelector('title') || s.querySelector('text') || {}).textContent || '',
                    points: s.querySelectorAll('circle, path.pt, rect.pt, [data-point]').length})),
                outputs: [...document.querySelectorAll('#outputs table tbody tr td:nth-child(2)')]
                    .map(t => t.textContent.trim()),
                text: document.body.innerText})""")
        finally:
            browser.close()


def test_a_regression_report_speaks_regression(reports):
    facts = _page_facts(reports["regression"])
    assert facts["task"] == "regression"
    assert {"MAE", "RMSE", "ΔRMSE", "cos min"} <= set(facts["heads"]) and "accuracy" not in facts["heads"]
    assert "confusion" not in facts["sections"] and "gallery" not in facts["sections"]
    scatter = next(p for p in facts["plots"] if "RMSE" in p["title"])
    assert scatter["points"] > 0
    assert "no measured points" not in facts["text"]


def test_a_raw_two_output_report_shows_each_output(reports):
    facts = _page_facts(reports["raw"])
    assert facts["task"] == "raw" and {"cos min", "rel err", "max err"} <= set(facts["heads"])
    assert "confusion" not in facts["sections"] and "outputs" in facts["sections"]
    assert {"scores", "value"} <= {o.replace(" (scored)", "") for o in facts["outputs"]}
    assert any("per-output error" in p["title"] and p["points"] > 0 for p in facts["plots"]), facts["plots"]
