"""A user's .keras is read for its signature in the runtime worker its baseline then runs in, and a library's
exception raised in any worker (runtime, conversion, sweep, atlas build: proc.worker.Worker) comes home by name
(errors.ForeignError, errors.sent_home), alone or in the chain of a deploytool error: the process that runs the
matrix never imports TensorFlow for either (4-5 s of CPU, and its native log on the user's terminal). Checked in a
fresh process, as a CLI run is: the pytest worker has TensorFlow imported already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
OWN_WORKERS = True  # the check runs in a process of its own, with workers of its own

def _fresh(tmp_path, script: str, *args) -> tuple[dict, str]:
    """`script` run in a fresh process (as a CLI run is), with deploytool importable: what it printed last, as
    JSON, and its stderr."""
    (tmp_path / "script.py").write_text(script)
    r = subprocess.run([sys.executable, str(tmp_path / "script.py"), *map(str, args)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                                                    "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


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
    got, stderr = _fresh(tmp_path, _RUN, tmp_path / "emb.keras", tmp_path / "ws")
    assert got["inputs"] == ["ids"] and got["shape"] == [4, 2]
    # read in the keras worker, which then ran both baselines: one worker, TensorFlow never imported here
    assert got["read_by"] == 1 and got["workers"] == 1 and not got["tensorflow_here"], got
    name, message, own = got["error"]
    assert name.endswith("InvalidArgumentError") and name.startswith("tensorflow.") and "50" in message, got
    assert own is False, got  # the worker's frames came with it: raised in the library, not in deploytool's code
    assert "cuDNN" not in stderr and "computation placer" not in stderr, stderr[-2000:]


_CHAIN = """
import json, sys


def conversion_fails():  # as convert._run_step words a converter's failure: raised from the library's exception
    import tensorflow as tf

    from deploytool.errors import Raised, StageFailed

    try:
        raise tf.errors.InvalidArgumentError(None, None, "the converter refused it")
    except Exception as e:
        raise StageFailed("conversion_failed", "tf.lite.TFLiteConverter: refused", Raised.of(e)) from e


def library_fails():
    import tensorflow as tf

    raise tf.errors.ResourceExhaustedError(None, None, "out of it")


if __name__ == "__main__":
    from deploytool.errors import ForeignError, Raised, StageFailed, exception_name
    from deploytool.proc.worker import Worker

    got = {}
    with Worker() as worker:
        try:
            worker.call(conversion_fails)
        except StageFailed as e:
            got["stage"] = [e.status, e.raised.exception, type(e.__cause__).__name__, type(e.__context__).__name__,
                            getattr(e.__context__, "exception", "")]
        try:
            worker.call(library_fails)
        except ForeignError as e:
            got["bare"] = [exception_name(e), str(e), Raised.of(e).exception, [f.function for f in Raised.of(e).frames]]
    got["tensorflow_here"] = "tensorflow" in sys.modules
    print(json.dumps(got))
"""


def test_a_deploytool_error_raised_from_a_library_error_in_a_worker_comes_home_without_the_library(tmp_path):
    """A conversion that fails in TensorFlow is a StageFailed raised from TensorFlow's exception in the conversion
    worker; the parent got that exception too (in its context) and imported TensorFlow to read it. Now the chain
    comes home as ForeignErrors and the StageFailed keeps its evidence (`raised`); a bare library error is one."""
    got, _ = _fresh(tmp_path, _CHAIN)
    status, raised, _, context, context_is = got["stage"]
    assert status == "conversion_failed" and raised.endswith("errors_impl.InvalidArgumentError"), got
    assert context == "ForeignError" and context_is.endswith("InvalidArgumentError"), got
    name, message, exception, frames = got["bare"]
    assert name == "ResourceExhaustedError" and message == "out of it" and exception.startswith("tensorflow."), got
    assert frames[-1] == "library_fails", got  # where the worker raised it: its frames came with it
    assert not got["tensorflow_here"], got


_SAVED = """
import json, sys
from pathlib import Path

from deploytool.errors import BadModelFile
from deploytool.run import usermodel
from deploytool.runtimes.isolated import runtime_workers
from deploytool.workspace import Workspace

if __name__ == "__main__":
    good, writes, ws = Path(sys.argv[1]), Path(sys.argv[2]), Workspace.open(sys.argv[3])
    with runtime_workers() as workers:
        spec, _ = usermodel.resolve(good, usermodel.UserModelOptions(), ws)
        checked_and_read = workers.started
        try:
            usermodel.resolve(writes, usermodel.UserModelOptions(), ws)
            refused = ""
        except BadModelFile as e:
            refused = str(e)
    print(json.dumps({"inputs": [t.name for t in spec.signature.inputs], "workers": checked_and_read,
                      "refused": refused, "tensorflow_here": "tensorflow" in sys.modules}))
"""


def test_a_savedmodels_graph_is_checked_where_it_runs_and_a_graph_that_writes_files_is_still_refused(tmp_path):
    """A SavedModel's ops are checked against TensorFlow's op registry before anything loads it (tf_graph), on every
    run: in the worker its signature is then read in and its baseline run in, not in the process that runs the
    matrix (which imported TensorFlow for it). A graph that writes a file is refused there with its one line."""
    import tensorflow as tf

    class Doubles(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": x * 2.0}

    class Writes(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            tf.io.write_file(str(tmp_path / "written.txt"), tf.strings.as_string(tf.reduce_sum(x)))
            return {"y": x * 2.0}

    for name, module in (("good", Doubles()), ("writes", Writes())):
        tf.saved_model.save(module, str(tmp_path / name), signatures={"serving_default": module.serve})
    got, _ = _fresh(tmp_path, _SAVED, tmp_path / "good", tmp_path / "writes", tmp_path / "ws")
    assert got["inputs"] == ["x"] and got["workers"] == 1 and not got["tensorflow_here"], got
    assert "WriteFile" in got["refused"] and "refused" in got["refused"], got
    assert not (tmp_path / "written.txt").exists()
