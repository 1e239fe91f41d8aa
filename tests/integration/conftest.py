"""Fixtures for the integration tier: one workspace where LeNet-5 is trained
for real (manifest epochs, both frameworks) once per session and reused by the
training, baseline and migrate tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def lenet5_workspace(tmp_path_factory):
    from deploytool.data import load_dataset
    from deploytool.spec import load_spec
    from deploytool.train import train
    from deploytool.workspace import Workspace

    ws = Workspace.open(tmp_path_factory.mktemp("ws-lenet5"))
    spec = load_spec("lenet5")
    ds = load_dataset(spec)
    trained = {fw: train(spec, fw, ds, ws, progress=False) for fw in ("keras", "torch")}
    return ws, spec, ds, trained
