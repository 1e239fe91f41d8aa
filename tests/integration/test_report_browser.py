"""The HTML report rendered in real headless Debian Chromium (Playwright with
executable_path): opened as a file:// URL, it must show the summary rows, the
plots with their data points, the confusion-difference tables and the decoded
flipped-sample images, fetch nothing from anywhere, and sort its table. A
screenshot is written so a person can judge the page.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from deploytool.report import summary_rows, write_report

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _chromium() -> str:
    for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium"):
        if Path(p).exists():
            return p
    found = shutil.which("chromium")
    assert found, "Debian chromium is missing: run `make setup` (apt-get install chromium)"
    return found


def _synthetic_run():
    # The synthetic-run builder lives with the unit tests; load it by path (tests/unit is not a package).
    path = Path(__file__).resolve().parents[1] / "unit" / "test_report.py"
    spec = importlib.util.spec_from_file_location("report_unit_tests", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_input


def test_report_renders_in_headless_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    inp = _synthetic_run()(tmp_path / "data", n_samples=600)
    paths = write_report(inp, tmp_path / "report")
    rows = summary_rows(inp)
    measured = [r for r in rows if r.status == "measured"]
    with_flips = [r for r in measured if r.flipped_count]
    assert with_flips, "the synthetic run must contain flipped samples"
    shot = tmp_path / "report.png"

    requests, errors = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(paths.html.as_uri(), wait_until="load")

            labels = page.locator("table.summary tbody tr")
            assert labels.count() == len(rows)
            first = page.locator("table.summary tbody tr").first.locator("td").nth(5).inner_text()
            assert rows[0].accuracy is not None
            assert first.strip() == f"{100 * rows[0].accuracy:.2f}%"
            assert page.locator("table.summary tbody tr.failing").count() == sum(r.failing for r in rows)

            n_points = page.locator("svg.scatter .pt").count()
            assert n_points == len(measured) + len(inp.baselines)
            assert page.locator("svg.scatter .pt.baseline").count() == len(inp.baselines)
            boxes = page.locator("svg.boxplot rect.box").count()
            assert boxes == len(measured) + len(inp.baselines)
            bbox = page.locator("svg.scatter").bounding_box()
            assert bbox and bbox["width"] > 200 and bbox["height"] > 150

            cms = page.locator("table.cm")
            assert cms.count() == min(12, len(with_flips))
            assert cms.first.locator("tbody tr").count() == len(inp.labels)
            coloured = page.locator("table.cm").first.locator("td[style*='background']").count()
            assert coloured > 0

            imgs = page.locator("#gallery img")
            assert imgs.count() == sum(min(24, int(r.flipped_count)) for r in with_flips if r.flipped_count)
            decoded = page.evaluate("""() => Array.from(document.querySelectorAll('#gallery img'))
                .map(i => [i.complete, i.naturalWidth, i.naturalHeight])""")
            assert all(c and w == 56 and h == 56 for c, w, h in decoded), decoded[:3]

            # the sort: click "accuracy" and the column reads ascending
            page.locator("table.summary thead th", has_text="accuracy").click()
            values = page.evaluate("""() => Array.from(document.querySelectorAll('table.summary tbody tr'))
                .map(r => r.cells[5].dataset.v).filter(v => v !== '').map(Number)""")
            assert values == sorted(values) and len(values) == len(measured)

            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()

    assert shot.stat().st_size > 50_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [u for u in requests if not u.startswith("file://")] == [] and len(requests) == 1
    assert errors == [], errors
    print(f"screenshot: {shot}")
