"""Issue 10, item 4: one Chromium per run. Rows that share a `WebSession` run
in one browser, each in a fresh context whose renderer is its own (memory
figures stay per row); a crashed page is that row's failure, the browser is
relaunched for the next row, and nothing outlives the session. Launches are
counted from the real processes, not from the session's bookkeeping."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from typing import Any

import numpy as np
import psutil
import pytest

from deploytool.errors import StageFailed
from deploytool.runtimes.web import WebRuntime
from deploytool.runtimes.web_session import WebSession
from tests.integration import web_models
from tests.integration.browser_launches import BrowserLaunches, kill_renderers

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return web_models.build(tmp_path_factory.mktemp("web_models"))


def _row(session, artifact, inputs, **options):
    rt = WebRuntime(session=session, warmup_runs=2, timeout_s=120, **options)
    try:
        rt.load(artifact)
        return rt.run(inputs)
    finally:
        rt.close()


def _alive(pids: set[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _kill_renderers(session) -> int:
    return kill_renderers(session.browser().process_ids)


def test_rows_of_a_session_share_one_browser_each_in_its_own_renderer(models):
    with BrowserLaunches() as launches, WebSession() as session:
        outs = [_row(session, art, models.inputs, **opts)
                for art, opts in [(models.tfjs, {"backend": "wasm"}), (models.onnx, {}), (models.tflite, {}),
                                  (models.tfjs, {"backend": "cpu"})]]
        pids = set(session.process_ids)
    assert session.launches == 1
    assert launches.count == 1, launches
    for out in outs:
        assert np.abs(out.outputs - models.keras_outputs).max() < 1e-4
        # each row reads its own renderer: the wasm heap of an earlier row must not leak into its figure
        assert out.memory_bytes["renderer_peak_rss_bytes"] > 20e6
    launch_ms = [o.environment["timings_ms"]["browser_launch"] for o in outs]
    assert launch_ms[0] > 0 and launch_ms[1:] == [0.0, 0.0, 0.0], launch_ms  # only the first row paid for it
    assert _alive(pids) == [], "Chromium processes outlived the session"


def test_a_crashed_page_fails_its_row_only_and_the_browser_is_relaunched(models):
    with BrowserLaunches() as launches, WebSession() as session:
        first = _row(session, models.onnx, models.inputs)
        rt = WebRuntime(session=session, warmup_runs=2, timeout_s=120)
        rt.load(models.tflite)
        crashed_browser = set(session.process_ids)
        assert _kill_renderers(session)  # a real crash of this row's page
        with pytest.raises(StageFailed) as err:
            rt.run(models.inputs)
        rt.close()
        assert err.value.status == "runtime_failed" and "crash" in err.value.reason.lower()
        assert _alive(crashed_browser) == [], "the crashed row's browser should be gone"
        after = _row(session, models.tflite, models.inputs)  # the next row runs, in a new browser
        pids = set(session.process_ids)
    assert session.launches == 2
    assert launches.count == 2, launches
    for out in (first, after):
        assert np.abs(out.outputs - models.keras_outputs).max() < 1e-4
    assert after.environment["timings_ms"]["browser_launch"] > 0
    assert _alive(pids) == []


def test_a_model_the_page_refuses_keeps_the_browser_for_the_next_row(models, tmp_path):
    broken = tmp_path / "tfjs"
    shutil.copytree(models.tfjs.path, broken)
    (broken / "model.json").write_text('{"format": "graph-model", "modelTopology": ')
    with BrowserLaunches() as launches, WebSession() as session:
        with pytest.raises(StageFailed) as err:
            _row(session, dataclasses.replace(models.tfjs, path=broken), models.inputs)
        assert err.value.status == "load_failed" and "JSON" in err.value.reason  # the page's own error: final
        out = _row(session, models.onnx, models.inputs)
    assert np.abs(out.outputs - models.keras_outputs).max() < 1e-4
    assert launches.count == 1


def test_inputs_are_served_from_memory_and_gone_after_the_row(models):
    with WebSession() as session:
        rt = WebRuntime(session=session, warmup_runs=0, timeout_s=120)
        rt.load(models.onnx)
        out = rt.run(models.inputs)
        server = session.server()
        assert server._blobs == {}, "a row's inputs must not stay in the server"
        rt.close()
        assert all(not r.prefix.startswith("/model/") for r in server._routes), "the row's model stays mounted"
    assert out.environment["timings_ms"]["inputs_write"] < 50  # no file written


def test_a_session_with_no_row_launches_nothing():
    with BrowserLaunches() as launches, WebSession():
        time.sleep(0.2)
    assert launches.count == 0


_WASM_ENTRIES = """() => performance.getEntriesByType('resource').filter(e => e.name.endsWith('.wasm'))
    .map(e => [new URL(e.name).pathname, e.transferSize])"""


def _renderer_of_open_row(session, earlier: set[int]) -> int:
    """The renderer of the row whose page is open: the largest live renderer (a page that loaded a wasm runtime
    is far bigger than a spare renderer). It must be new: no renderer alive before the row's page opened."""
    rss = {pid: psutil.Process(pid).memory_info().rss for pid in session.browser().live_process_ids("renderer")}
    pid = max(rss, key=lambda p: rss[p])
    assert pid not in earlier, "the row's page was given a renderer that was alive before it opened"
    return pid


def test_later_rows_take_the_libraries_from_the_runs_profile_each_in_a_renderer_of_its_own(models):
    """Issue 25: one browser profile per run. The second onnxruntime-web row's 15 MB wasm comes from the HTTP
    cache (transferSize 0 in its page; the server sees one request for it in the whole run) while every row
    still fetches its own model, runs in a renderer process of its own (the previous one is gone) and reports
    that renderer's memory; the profile is deleted with the browser."""
    rows: list[dict[str, Any]] = []
    with WebSession() as session:
        server = session.server()
        for art in (models.onnx, models.tflite, models.onnx):
            rt = WebRuntime(session=session, warmup_runs=2, timeout_s=120)
            try:
                rt.load(art)
                out = rt.run(models.inputs)
                rows.append({"out": out, "renderer": _renderer_of_open_row(session, rt._earlier_renderers),
                             "live": set(session.browser().live_process_ids("renderer")), "wasm": dict(rt._page.evaluate(_WASM_ENTRIES)),
                             "model": f"/model/{rt._row}/model.{'onnx' if art is models.onnx else 'tflite'}"})
            finally:
                rt.close()
        profile = session.browser().profile_dir
        assert profile is not None and profile.is_dir()
        served = dict(server.requests_served)
    assert profile is not None and not profile.exists(), "the run's browser profile outlived the session"

    first, tflite, second = rows
    ort_wasm = [p for p in first["wasm"] if p.startswith("/lib/onnxruntime-web/")]
    assert ort_wasm and first["wasm"][ort_wasm[0]] > 10e6  # the first row downloaded it
    assert second["wasm"][ort_wasm[0]] == 0, "the second onnxruntime-web row did not take its wasm from the cache"
    assert served[ort_wasm[0]] == 1, served
    assert served["/lib/tfjs-tflite/tf-tflite.min.js"] == 1
    for row in rows:  # a row's model is never cached: each row asked for its own
        assert served[row["model"]] == 1
        assert np.abs(row["out"].outputs - models.keras_outputs).max() < 1e-4
        assert row["out"].memory_bytes["renderer_peak_rss_bytes"] > 20e6
    pids = [r["renderer"] for r in rows]
    assert len(set(pids)) == 3, f"rows shared a renderer process: {pids}"
    for before, after in zip(rows, rows[1:]):  # closing a row's page ended its renderer: never reused
        assert before["renderer"] not in after["live"], "the previous row's renderer still ran during the next"


def test_runs_inside_one_open_session_share_its_browser_and_a_webgpu_probe_borrows_its_playwright(models):
    """web_session(): re-entrant as a run's workers are. Two runs inside one block (the atlas' architectures) get the
    one session, so Chromium is launched once for both; the WebGPU probe a run's preflight makes inside it drives its
    own browser through the session's Playwright (Playwright's sync API allows one per thread); a run in another
    thread opens its own; the block's end closes the browser."""
    from deploytool.runtimes import web_session as ws

    with BrowserLaunches() as launches, ws.web_session() as outer:
        for _ in range(2):  # two runs, each opening "its" session
            with ws.web_session() as run:
                assert run is outer
                out = _row(run, models.onnx, models.inputs)
                assert np.abs(out.outputs - models.keras_outputs).max() < 1e-4
        assert outer.launches == 1
        elsewhere: list[bool] = []  # a run in another thread: Playwright drives a browser from its own thread only

        def other_thread() -> None:
            with ws.web_session() as run:
                elsewhere.append(run is outer)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=30)
        assert elsewhere == [False]
        ws._ADAPTERS.clear()  # asked afresh here, not answered from this process's memory
        adapter = ws.probe_webgpu_adapter()
        assert "could not be asked" not in adapter.get("reason", ""), adapter
        pids = set(outer.process_ids)
    assert launches.count == 2, launches  # the runs' browser and the probe's WebGPU one
    assert _alive(pids) == [], "Chromium processes outlived the block"
    with ws.web_session() as fresh:  # closed: a block after it opens a session of its own
        assert fresh is not outer
