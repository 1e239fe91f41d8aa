"""Fixtures for the integration tier: one workspace where LeNet-5 is trained
for real (manifest epochs, both frameworks) once per session and reused by the
training, baseline and migrate tests. Under pytest-xdist (`make test` runs two
workers) the training happens once, under a file lock, and each worker gets its
own workspace with a copy of the trained models (a workspace is one worker's)."""

from __future__ import annotations

import os
import shutil

import pytest


def _train(ws):
    from deploytool.data import load_dataset
    from deploytool.spec import load_spec
    from deploytool.train import train

    spec = load_spec("lenet5")
    ds = load_dataset(spec)
    trained = {fw: train(spec, fw, ds, ws, progress=False) for fw in ("keras", "torch")}
    return spec, ds, trained


@pytest.fixture(scope="session")
def lenet5_workspace(tmp_path_factory):
    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp_path_factory.mktemp("ws-lenet5"))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from filelock import FileLock

        shared = tmp_path_factory.getbasetemp().parent / "lenet5-shared"
        with FileLock(str(shared) + ".lock"):
            if not (shared / "done").exists():
                _train(Workspace.open(shared / "ws"))
                (shared / "done").touch()
        shutil.copytree(shared / "ws" / "models", ws.root / "models", dirs_exist_ok=True)
    spec, ds, trained = _train(ws)  # trains here without xdist; with it, every model is found in the cache
    return ws, spec, ds, trained


