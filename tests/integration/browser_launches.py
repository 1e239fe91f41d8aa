"""`BrowserLaunches`: counts the Chromium browsers this test process starts, from
the real processes (not from deploytool's own bookkeeping). A launch is a browser
profile (`--user-data-dir`, Playwright gives every launch its own): a process that
carries a browser's command line without being a new browser (a helper between its
fork and its exec, one orphaned for a moment while its browser exits) is the same
launch, not another one."""

from __future__ import annotations

import threading
import time

import psutil


def _is_chromium(cmd: list[str]) -> bool:
    return bool(cmd) and "chromium" in cmd[0]


def _profile(cmd: list[str]) -> str:
    return next((a.split("=", 1)[1] for a in cmd if a.startswith("--user-data-dir=")), "")


def _cmdline_of_parent(p: psutil.Process) -> list[str]:
    try:
        parent = p.parent()
        return parent.cmdline() if parent else []
    except psutil.Error:
        return []


class BrowserLaunches:
    """Counts Chromium browser processes (not renderers or helpers) started by this process, by
    watching its children: a browser lives for seconds, far longer than one poll."""

    def __init__(self):
        self.seen: dict[str, set[int]] = {}  # launch (its profile, else its pid) -> the browser pids seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            for p in me.children(recursive=True):
                try:
                    cmd = p.cmdline()
                except psutil.Error:
                    continue
                # a browser: not a helper (--type=...), not `chromium --version` (the preflight asks it)
                if _is_chromium(cmd) and "--headless" in cmd and not any(a.startswith("--type=") for a in cmd) \
                        and not _is_chromium(_cmdline_of_parent(p)):  # a helper forks before it execs
                    self.seen.setdefault(_profile(cmd) or f"pid {p.pid}", set()).add(p.pid)
            # Each poll reads every process of the machine (psutil's children() maps them all to their
            # parents): every 20 ms it took a third of a core through a whole migrate run. A browser lives a
            # second at least (its launch alone takes that), ten polls at this pace.
            time.sleep(0.1)

    def __enter__(self) -> "BrowserLaunches":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def count(self) -> int:
        return len(self.seen)

    def __repr__(self) -> str:
        return f"BrowserLaunches({self.seen})"


def kill_renderers(pids) -> int:
    """A real page crash: SIGKILL the renderer processes among a browser's `pids`; how many were killed."""
    killed = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if "--type=renderer" in proc.cmdline():
                proc.kill()
                killed += 1
        except psutil.NoSuchProcess:
            pass
    return killed
