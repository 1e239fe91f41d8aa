"""`WebSession`: the run-scoped part of the web runtime — one headless Chromium
and one harness server (page and libraries) that every web row of a run
shares, each row in a fresh browser context of its own. Launching is lazy (a
run whose web rows are all stored launches nothing), and a browser that a row
left crashed or hung is discarded so the next row gets a new one. It knows
nothing about models or rows; `WebRuntime` mounts a row's model and inputs
into the server and opens the row's context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deploytool.devices.browser import Chromium, find_chromium
from deploytool.devices.harness_server import HarnessServer, library_routes
from deploytool.devices.web_harness import check_harness


class WebSession:
    """Open with `with WebSession() as s:` (or call `close()`); `browser()` and `server()` start on first use."""

    def __init__(self, executable: Path | str | None = None, harness_root: Path | None = None):
        self.executable = executable
        self.harness_root = harness_root
        self.launches = 0  # browsers launched so far: 1 for a healthy run, one more after each crash
        self.process_ids: set[int] = set()  # every Chromium process this session ran, for orphan checks
        self._browser: Any = None
        self._server: Any = None
        self._last_launch_ms: float | None = None

    def server(self) -> Any:
        """The harness server (page + libraries), started once."""
        if self._server is None:
            self.harness_root = check_harness(self.harness_root)
            self._server = HarnessServer(library_routes(self.harness_root)).start()
        return self._server

    def browser(self) -> Any:
        """A connected Chromium: the one already running, or a new one if there was none or it died."""
        if self._browser is not None and not self._browser.connected:
            self.discard_browser()
        if self._browser is None:
            executable = self.executable or find_chromium()
            self._browser = Chromium(executable).launch()
            self.launches += 1
            self._last_launch_ms = self._browser.launch_ms
            self.process_ids |= self._browser.process_ids
        return self._browser

    def take_launch_ms(self) -> float:
        """Launch time of the browser, once (for the row that paid it); 0.0 after that."""
        ms, self._last_launch_ms = self._last_launch_ms, None
        return float(ms or 0.0)

    def discard_browser(self) -> None:
        """Close the browser (a crashed or hung one too) and reap its processes; the next row relaunches."""
        browser, self._browser = self._browser, None
        if browser is not None:
            self.process_ids |= browser.process_ids
            browser.close()

    def close(self) -> None:
        try:
            self.discard_browser()
        finally:
            server, self._server = self._server, None
            if server is not None:
                server.stop()

    def __enter__(self) -> "WebSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
