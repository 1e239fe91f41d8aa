"""Shared test configuration: quiet TensorFlow, one intra-op thread (the CI box
has two cores), and the repository root for tests that call the CLI."""

import gc
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# A test worker holds TensorFlow and PyTorch (~400,000 objects) and allocates models for minutes: each full
# collection walks them all (0.2 s). At Python's default (a full one every 10 middle ones) the three workers of a
# `make test` ran 106 full collections, 25.6 s of CPU (measured with gc.callbacks); one every 100 middle ones keeps
# the same collector, only less often, in the test processes (not in what they start).
gc.set_threshold(700, 10, 100)

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


# The groups that take longest (seconds of one worker in a cold `make test`, stop 57: the phone group 441, then
# these 180-80), handed out first: `make test` passes --no-loadscope-reorder, so xdist sends the groups in this
# order and the many short unit files fill the workers' ends. Its own order, by number of tests, sent a file of one
# three-minute test after hundreds of millisecond ones, and a worker ran it alone at the end. Only the order: a file
# missing here runs after them.
LONGEST_FIRST = ("android", "tests/integration/test_findings_triage.py", "tests/integration/test_migrate_host.py",
                 "tests/integration/test_migrate_web.py", "tests/integration/test_hostile_inputs.py",
                 "tests/integration/test_lab.py", "tests/integration/test_web.py", "tests/integration/test_convert.py",
                 "tests/contract/test_contract_converters.py", "tests/integration/test_usermodel.py",
                 "tests/integration/test_web_session.py", "tests/integration/test_model_files.py")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items):
    """Groups for pytest-xdist (`make test` runs `-n 3 --dist loadgroup`): a test file's tests share a worker, so
    its module fixtures (a whole migrate run) are made once; tests that drive the one adb server (port 5037) and
    its simulated phones share one group, one after another: another worker's phones would show up in
    `adb devices` mid-test. The longest groups first (LONGEST_FIRST), then the other integration files, then the
    rest, each in collection order."""
    groups = {}
    for item in items:
        group = "android" if item.get_closest_marker("android") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group

    def rank(item) -> int:
        group = groups[item.nodeid]
        if group in LONGEST_FIRST:
            return LONGEST_FIRST.index(group)
        return len(LONGEST_FIRST) + (0 if group.startswith("tests/integration/") else 1)

    items.sort(key=rank)
