"""A user's .keras is read for its signature in the runtime worker its baseline then runs in, and a library's
exception raised there comes home by name (errors.ForeignError): the process that runs the matrix never imports
TensorFlow for either (4-5 s of CPU, and its native log on the user's terminal). Checked in a fresh process, as a
CLI run is: the pytest worker has TensorFlow imported already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
OWN_WORKERS = True  # the check runs in a process of its own, with workers of its own

_RUN = """
import json, sys
from pathlib import Path

import numpy as np

from deploytool.data.feed import Feed
from deploytool.errors import ForeignError, Raised
from deploytool.run import usermodel
from deploytool.runtimes.isolated import load_and_run, runtime_workers
from deploytool.workspace import Workspace

if __name__ == "__main__":
    model, ws = Path(sys.argv[1]), Workspace.open(sys.argv[2])
    with runtime_workers() as workers:
        spec, artifact = usermodel.resolve(model, usermodel.UserModelOptions(), ws)
        read_by = workers.started
        ok = load_and_run("pc", "keras", "", artifact, Feed.one("ids", np.ones((4, 5), np.int32)))
        try:
            load_and_run("pc", "keras", "", artifact, Feed.one("ids", np.full((4, 5), 50, np.int32)))
            raised = None
        except ForeignError as e:
            raised = Raised.of(e)
        print(json.dumps({"inputs": [t.name for t in spec.signature.inputs], "read_by": read_by,
                          "workers": workers.started, "shape": list(ok.outputs.shape),
                          "error": raised and [raised.exception, raised.message, raised.in_own_code],
                          "tensorflow_here": "tensorflow" in sys.modules}))
"""


def test_a_keras_file_is_read_where_it_runs_and_its_errors_come_home_without_tensorflow(tmp_path):
    import keras

    inp = keras.Input((5,), dtype="int32", name="ids")
    out = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(10, 3)(inp)))
    keras.Model(inp, out).save(tmp_path / "emb.keras")
    (tmp_path / "run.py").write_text(_RUN)
    r = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path / "emb.keras"), str(tmp_path / "ws")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["inputs"] == ["ids"] and got["shape"] == [4, 2]
    # read in the keras worker, which then ran both baselines: one worker, TensorFlow never imported here
    assert got["read_by"] == 1 and got["workers"] == 1 and not got["tensorflow_here"], got
    name, message, own = got["error"]
    assert name.endswith("InvalidArgumentError") and name.startswith("tensorflow.") and "50" in message, got
    assert own is False, got  # the worker's frames came with it: raised in the library, not in deploytool's code
    assert "cuDNN" not in r.stderr and "computation placer" not in r.stderr, r.stderr[-2000:]
