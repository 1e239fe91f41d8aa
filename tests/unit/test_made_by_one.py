"""workspace.made_by_one: a cached folder is made by one process at a time; the second waits and finds it made
(two runs on one workspace emptied each other's artifact folder mid-write before it)."""

from __future__ import annotations

import subprocess
import sys
import time

from deploytool.workspace import made_by_one
from tests.conftest import ROOT

_HOLDER = """
import sys, time
from pathlib import Path
from deploytool.workspace import made_by_one
out = Path(sys.argv[1])
with made_by_one(out):
    print("held", flush=True)
    time.sleep(0.6)
    out.mkdir()
    (out / "artifact.json").write_text("{}")
"""


def test_a_second_maker_waits_for_the_first_and_finds_the_folder_made(tmp_path):
    out = tmp_path / "artifacts" / "k"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    with made_by_one(out):
        waited = time.monotonic() - start
        assert (out / "artifact.json").exists()  # made whole before the lock was let go
    assert holder.wait(timeout=30) == 0 and waited > 0.3
    with made_by_one(out):  # free again: taken at once, by the same process twice in a row
        pass
