"""The folders of onnx2tf runs kept by a conversion worker: one that was killed (a timeout, a crash) cannot
remove its own, so the next process that makes a run removes those of processes that no longer exist."""

import os
import subprocess
import sys
import tempfile

from deploytool.convert import _onnx2tf


def test_only_the_runs_of_processes_that_are_gone_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    folders = {who: tmp_path / f"{_onnx2tf.RUN_PREFIX}{pid}-x1y2" for who, pid in
               (("gone", gone.stdout.strip()), ("me", os.getpid()), ("parent", os.getppid()))}
    for folder in folders.values():
        (folder / "variables").mkdir(parents=True)
    unrelated = tmp_path / "deploytool-onnx2tf-somethingelse"
    unrelated.mkdir()
    _onnx2tf._remove_dead_processes_runs()
    assert {who for who, f in folders.items() if f.exists()} == {"me", "parent"}
    assert unrelated.exists()
