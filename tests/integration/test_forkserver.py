"""proc.forkserver through proc.worker: workers forked by a server that imported their framework once (PyTorch
here: 2 s to import, where TensorFlow takes 5), each with the environment its
caller had when it started, a dead one replaced, a dead server started again. Its life with a SIGKILLed caller: test_no_orphans.py."""

from __future__ import annotations

import os
import signal
import sys

import psutil
import pytest

from deploytool.proc.worker import Worker, WorkerLost

pytestmark = pytest.mark.slow

_SEEN: dict[str, object] = {}


def _note_start() -> None:
    """A setup: what the process held before anything of ours ran in it."""
    _SEEN["torch_at_start"] = "torch" in sys.modules


def _facts() -> dict:
    import gc

    return {"pid": os.getpid(), "parent": os.getppid(), "torch_at_start": _SEEN.get("torch_at_start"),
            "frozen": gc.get_freeze_count(),
            "probe": os.environ.get("DEPLOYTOOL_TEST_PROBE"), "default": os.environ.get("DEPLOYTOOL_TEST_DEFAULT")}


def _exit(code: int) -> None:
    os._exit(code)


def test_workers_forked_by_one_server_start_with_its_framework_and_their_callers_environment(monkeypatch):
    monkeypatch.setenv("TF_DEPLOYTOOL_TEST_KIND", "environment")  # workers of a kind no other test asked for
    monkeypatch.setenv("DEPLOYTOOL_TEST_PROBE", "first")
    env = {"DEPLOYTOOL_TEST_DEFAULT": "from the worker's env"}
    with Worker(_note_start, env=env, preload=("torch",)) as one:
        a = one.call(_facts)
        monkeypatch.setenv("DEPLOYTOOL_TEST_PROBE", "second")  # after the server started: the next worker sees it
        monkeypatch.setenv("DEPLOYTOOL_TEST_DEFAULT", "the caller's own")
        with Worker(_note_start, env=env, preload=("torch",)) as two:
            b = two.call(_facts)
    assert a["torch_at_start"] is True and b["torch_at_start"] is True  # imported by the server, not the worker
    # what the server imported is frozen: out of the collector's reach in the workers (~100,000 objects for torch)
    assert a["frozen"] > 50_000 and b["frozen"] > 50_000, (a["frozen"], b["frozen"])
    assert a["parent"] == b["parent"] != os.getpid() and a["pid"] != b["pid"]
    assert (a["probe"], a["default"]) == ("first", "from the worker's env")
    assert (b["probe"], b["default"]) == ("second", "the caller's own")
    with Worker(_note_start) as spawned:  # no preload: spawned by us, as before
        c = spawned.call(_facts)
    assert c["parent"] == os.getpid() and c["torch_at_start"] is False and c["frozen"] == 0


def test_a_dead_worker_is_replaced_and_a_dead_server_started_again(monkeypatch):
    monkeypatch.setenv("TF_DEPLOYTOOL_TEST_KIND", "replaced")
    with Worker(_note_start, preload=("torch",)) as w:
        first = w.call(_facts)
        with pytest.raises(WorkerLost, match="exit code 3"):
            w.call(_exit, 3)
        second = w.call(_facts)
        assert second["pid"] != first["pid"] and second["parent"] == first["parent"]
        os.kill(first["parent"], signal.SIGKILL)  # the server: its children die with it (parent-death signal)
        psutil.Process(second["pid"]).wait(timeout=10)
        with pytest.raises(WorkerLost):  # how it ended is unknown: the server that would say is gone
            w.call(_facts)
        third = w.call(_facts)
    assert third["parent"] not in (first["parent"], os.getpid()) and third["torch_at_start"] is True


def _modules_held_back() -> dict:
    """In a TensorFlow worker: which of the packages TensorFlow imports only when installed it holds, then whether
    the worker can still import them itself (pandas, the lightest) and use TensorFlow's Keras."""
    import numpy as np

    from deploytool.proc.quiet import DEFERRED_AT_IMPORT

    held = sorted(name for name in DEFERRED_AT_IMPORT if name in sys.modules)
    import keras
    import pandas

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    out = model.predict(np.ones((4, 3), np.float32), verbose=0)
    return {"held": held, "tensorflow": "tensorflow" in sys.modules, "frame": pandas.DataFrame({"a": [1]}).shape,
            "predicted": out.shape}


def test_a_tensorflow_server_imports_it_without_the_packages_it_only_probes_for(monkeypatch):
    """proc.quiet.import_tensorflow: JAX, pandas and scikit-learn, which importing TensorFlow 2.19 loads only because
    they are installed (1.5 of its 4.2 CPU-s), are left out of the server's import, and a worker that wants one
    imports it."""
    monkeypatch.setenv("TF_DEPLOYTOOL_TEST_KIND", "deferred")  # a server of its own
    with Worker(_note_start, preload=("tensorflow",)) as w:
        facts = w.call(_modules_held_back)
    assert facts == {"held": [], "tensorflow": True, "frame": (1, 1), "predicted": (4, 2)}
