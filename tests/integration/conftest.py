"""Fixtures for the integration tier: one workspace where LeNet-5 is trained
for real (manifest epochs, both frameworks) and reused by the training,
baseline and migrate tests. The training happens once, under a file lock, and
is kept in ~/.cache/deploytool/tests/ keyed by the code and inputs that make it
(a fresh clone reuses it; edit the trainer or the zoo and it trains again);
each pytest-xdist worker gets its own workspace with a copy of the trained
models (a workspace is one worker's)."""

from __future__ import annotations

import os
import shutil
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Callable

import pytest

from tests.kept import keep_conversions_of, kept_lenet5_conversions, kept_twin, seed_conversions


class _Shared:
    """What the in-process runs of this pytest worker share, as the atlas' runs do. The runtime and conversion
    workers (runtimes.isolated.runtime_workers, convert.lanes.shared_converters): TensorFlow (4.5 s of CPU to import
    here) or PyTorch is imported once per worker process for the session rather than once per run. The browser
    session (runtimes.web_session.web_session): Chromium launched (2 s of CPU with its driver) and the harness'
    libraries compiled once, not once per run. A module that needs workers of its own (one that names a plugin in
    $DEPLOYTOOL_PLUGINS for the workers it starts, or counts them) says `OWN_WORKERS = True`: the shared ones are
    closed before it and opened again after it. The browser is shared with the modules that say
    `SHARED_BROWSER = True` only: while a session's Playwright is started, no other can start in this thread (a
    test's own `sync_playwright()`, a `WebSession` of its own)."""

    def __init__(self, opens: Callable[[], list[AbstractContextManager]]) -> None:
        self._opens = opens  # the context managers shared (deploytool imported when first opened)
        self._stack: ExitStack | None = None

    def open(self) -> None:
        if self._stack is None:
            self._stack = ExitStack()
            for shared in self._opens():
                self._stack.enter_context(shared)

    def close(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()


def _workers() -> list[AbstractContextManager]:
    from deploytool.convert.lanes import shared_converters
    from deploytool.runtimes.isolated import runtime_workers

    return [runtime_workers(), shared_converters()]


def _browser() -> list[AbstractContextManager]:
    from deploytool.runtimes.web_session import web_session

    return [web_session()]


_SHARED_WORKERS = _Shared(_workers)
_SHARED_BROWSER = _Shared(_browser)


@pytest.fixture(scope="session", autouse=True)
def _close_shared_workers():
    yield
    _SHARED_BROWSER.close()
    _SHARED_WORKERS.close()


@pytest.fixture(scope="module", autouse=True)
def _shared_workers(request, _close_shared_workers):
    if getattr(request.module, "OWN_WORKERS", False):
        _SHARED_WORKERS.close()
    else:
        _SHARED_WORKERS.open()
    if getattr(request.module, "SHARED_BROWSER", False):
        _SHARED_BROWSER.open()
    else:
        _SHARED_BROWSER.close()
    yield


def _train(ws):
    from deploytool.data import load_dataset
    from deploytool.spec import load_spec
    from deploytool.train import train

    spec = load_spec("lenet5")
    ds = load_dataset(spec)
    trained = {fw: train(spec, fw, ds, ws, progress=False) for fw in ("keras", "torch")}
    return spec, ds, trained


def _shared_models(lock_dir: Path) -> list[Path]:
    """The folders of the trained twins, each filled once: by training under its own file lock (xdist workers and
    other sessions wait for it), or from the kept copy of an earlier session. The two workers start from different
    frameworks, so on a fresh machine they train the twins side by side instead of one waiting for both."""
    order = ["keras", "torch"]
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0")[-1:] in "13579":
        order.reverse()
    return [kept_twin("lenet5", fw, lock_dir) for fw in order]


@pytest.fixture
def fake(monkeypatch):
    """The runtime double tests/fake_runtime.py (onnxruntime, then its first output shifted), registered in this
    process and named in $DEPLOYTOOL_PLUGINS for the workers; unregistered after the test."""
    from tests import fake_runtime

    fake_runtime.register()
    monkeypatch.setenv("DEPLOYTOOL_PLUGINS", "tests.fake_runtime")
    yield fake_runtime
    fake_runtime.unregister()


@pytest.fixture(scope="session")
def keep_conversions():
    """`keep_conversions(ws)`: keep the conversions a matrix fixture made for the next session."""
    return keep_conversions_of


@pytest.fixture(scope="session")
def lenet5_workspace(tmp_path_factory):
    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp_path_factory.mktemp("ws-lenet5"))
    for models in _shared_models(tmp_path_factory.getbasetemp()):
        shutil.copytree(models, ws.root / "models", dirs_exist_ok=True)
    spec, ds, trained = _train(ws)  # every model is found in the cache: nothing trains here
    seed_conversions(ws, kept_lenet5_conversions())  # conversions of an earlier session
    return ws, spec, ds, trained


