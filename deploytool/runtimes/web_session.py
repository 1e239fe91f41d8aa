"""`WebSession`: the run-scoped part of the web runtime — one headless Chromium
and one harness server (page and libraries) that every web row of a run
shares, each row in a fresh page (its own renderer process) of the browser's
one temporary profile. The server lets the browser cache the page and the
libraries (never a row's model or inputs), so the profile's HTTP cache and
V8's code cache make a row after the first skip fetching and compiling
tfjs, onnxruntime-web's wasm and tfjs-tflite again. WebGPU rows get a
second Chromium of their own, launched with `WEBGPU_FLAGS` (the other rows'
browser never has them), with a profile of its own. Launching is lazy (a run whose web rows are all
stored launches nothing), and a browser that a row left crashed or hung is
discarded so the next row gets a new one. It knows nothing about models or
rows; `WebRuntime` mounts a row's model and inputs into the server and opens
the row's page.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from deploytool.devices.browser import WEBGPU_FLAGS, Chromium, find_chromium
from deploytool.devices.harness_server import HarnessServer, library_routes
from deploytool.devices.web_harness import check_harness

_ADAPTERS: dict[tuple[str, str], dict[str, Any]] = {}  # this process's answers, by browser binary and harness
_OPEN = threading.local()  # .session: the session of the run (or runs) open in this thread (Playwright's sync API
# drives a browser from the thread that started it: another thread's run opens a session of its own)


class WebSession:
    """Open with `with WebSession() as s:` (or call `close()`); `browser()` and `server()` start on first use.
    `webgpu_flags`: the extra Chromium flags of the WebGPU rows' browser (tests pass none to see a browser
    without an adapter)."""

    def __init__(self, executable: Path | str | None = None, harness_root: Path | None = None,
                 webgpu_flags: tuple[str, ...] = WEBGPU_FLAGS):
        self.executable = executable
        self.webgpu_flags = tuple(webgpu_flags)  # what the WebGPU rows' browser is launched with
        self.harness_root = harness_root
        self.launches = 0  # browsers launched so far: 1 for a healthy run, one more after each crash
        self.process_ids: set[int] = set()  # every Chromium process this session ran, for orphan checks
        self._browsers: dict[bool, Any] = {}  # by "launched with WEBGPU_FLAGS"
        self._driver: Any = None  # one Playwright for both browsers (its sync API allows one per thread)
        self._server: Any = None
        self._last_launch_ms: float | None = None

    def server(self) -> Any:
        """The harness server (page + libraries, cacheable), started once."""
        if self._server is None:
            self.harness_root = check_harness(self.harness_root)
            self._server = HarnessServer(library_routes(self.harness_root), cache=True).start()
        return self._server

    def browser(self, webgpu: bool = False) -> Any:
        """A connected Chromium: the one already running, or a new one if there was none or it died.
        `webgpu`: the browser for WebGPU rows, launched with WEBGPU_FLAGS."""
        current = self._browsers.get(webgpu)
        if current is not None and not current.connected:
            self.discard_browser(current)
            current = None
        if current is None:
            executable = self.executable or find_chromium()
            current = Chromium(executable, self.webgpu_flags if webgpu else (), driver=self.driver()).launch()
            self._browsers[webgpu] = current
            self.launches += 1
            self._last_launch_ms = current.launch_ms
            self.process_ids |= current.process_ids
        return current

    def driver(self) -> Any:
        """The session's Playwright, started once: Playwright's sync API allows one per thread, so whatever else
        drives a browser in this thread while the session is open borrows it."""
        if self._driver is None:
            from playwright.sync_api import sync_playwright

            self._driver = sync_playwright().start()
        return self._driver

    def take_launch_ms(self) -> float:
        """Launch time of the browser, once (for the row that paid it); 0.0 after that."""
        ms, self._last_launch_ms = self._last_launch_ms, None
        return float(ms or 0.0)

    def discard_browser(self, browser: Any = None) -> None:
        """Close a browser (a crashed or hung one too; default: every one) and reap its processes; the next row
        that needs it relaunches."""
        for key, b in list(self._browsers.items()):
            if browser is None or b is browser:
                del self._browsers[key]
                self.process_ids |= b.process_ids
                b.close()

    def close(self) -> None:
        try:
            self.discard_browser()
            driver, self._driver = self._driver, None
            if driver is not None:
                try:
                    driver.stop()
                except Exception:  # a driver that died with its browser: nothing left to stop
                    pass
        finally:
            server, self._server = self._server, None
            if server is not None:
                server.stop()

    def __enter__(self) -> "WebSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def web_session() -> Iterator[WebSession]:
    """The session a run's web rows share, closed when the run ends. Re-entrant, as runtimes.isolated.runtime_workers
    is: inside one open in this thread, that one. So runs made inside one block (the atlas' architectures, one test process's
    runs) share its browser and server, each row still in a fresh page of its own; Chromium is launched (about 2 s
    of CPU with its driver) and tfjs, onnxruntime-web and tfjs-tflite compiled into its code cache once for all of
    them. A browser a run left crashed is replaced for the next row, as within a run."""
    if getattr(_OPEN, "session", None) is not None:
        yield _OPEN.session
        return
    _OPEN.session = session = WebSession()
    try:
        yield session
    finally:
        _OPEN.session = None
        session.close()


def probe_webgpu_adapter(harness_root: Path | None = None, executable: Path | str | None = None) -> dict[str, Any]:
    """The WebGPU adapter a WebGPU row's browser offers the harness page: `{"available": True, "vendor": ...,
    "architecture": ..., "is_fallback_adapter": ...}` or `{"available": False, "reason": ...}`. Launches that
    browser once per process (about a second); a browser that will not start is a reason too, not an error."""
    root = check_harness(harness_root)
    exe = Path(executable or find_chromium())
    key = (str(exe), str(root))
    if key in _ADAPTERS:
        return dict(_ADAPTERS[key])
    try:
        # inside an open session (web_session), its Playwright: a second one in this thread cannot start
        session = getattr(_OPEN, "session", None)
        driver = session.driver() if session is not None else None
        with HarnessServer(library_routes(root)) as server, Chromium(exe, WEBGPU_FLAGS, driver=driver) as browser:
            page = browser.new_page()
            page.goto(f"{server.origin}/index.html", wait_until="load", timeout=60_000)
            _ADAPTERS[key] = dict(page.evaluate("() => window.harness.adapter()"))
    except Exception as e:  # any failure to ask is the answer "none", with its reason (not kept: ask again)
        return {"available": False, "reason": f"the WebGPU browser could not be asked: {' '.join(str(e).split())}"[:300]}
    return dict(_ADAPTERS[key])
