"""Shared test configuration: quiet TensorFlow, one intra-op thread (the CI box
has two cores), and the repository root for tests that call the CLI."""

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


def run_cli(*args: str, env: dict | None = None, timeout: float = 900, cwd: Path | None = None):
    """Run `python -m deploytool ARGS` in a subprocess; returns CompletedProcess."""
    import subprocess

    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "deploytool", *args], capture_output=True, text=True,
                          env=e, timeout=timeout, cwd=cwd or ROOT)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items):
    """Groups for pytest-xdist (`make test` runs `-n 3 --dist loadgroup`): a test file's tests share a worker, so
    its module fixtures (a whole migrate run) are made once; tests that drive the one adb server (port 5037) and
    its simulated phones share one group, one after another: another worker's phones would show up in
    `adb devices` mid-test."""
    for item in items:
        group = "android" if item.get_closest_marker("android") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
