"""Conversions run in a child process: a converter killed mid-conversion (as
the OOM killer does) or one past its timeout becomes that combination's
result, and the next conversion gets a fresh worker and succeeds. The worker
itself (exit hooks then kill at the end, how a process ended, the parent-death
guards) is tested on plain functions in tests/unit/test_proc_worker.py."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from deploytool.convert.isolated import IsolatedConverter
from deploytool.errors import StageFailed
from tests.integration.tiny_models import build_keras

pytestmark = pytest.mark.slow
OWN_WORKERS = True  # it opens and closes workers of its own and looks inside them (conftest.py)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_keras(tmp_path_factory.mktemp("tiny"), epochs=1)


def _worker_pids() -> set[int]:
    """Child processes that are conversion workers (not multiprocessing's resource tracker, nor a fork server that
    forks workers and waits for the next: proc.forkserver)."""
    import psutil

    from deploytool.proc.forkserver import server_pids

    pids, servers = set(), server_pids()
    for c in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(c.cmdline()) and c.pid not in servers:
                pids.add(c.pid)
        except psutil.Error:
            pass
    return pids


def test_a_killed_converter_is_a_result_and_the_next_one_works(tiny, tmp_path):
    conv = IsolatedConverter(tmp_path / "convert.log")
    try:
        before = _worker_pids()

        def kill_worker_when_busy() -> None:
            deadline = time.time() + 120
            while time.time() < deadline:
                new = _worker_pids() - before
                log = tmp_path / "convert.log"
                if new and log.exists() and "--- convert" in log.read_text():
                    time.sleep(0.3)  # inside the converter now
                    for pid in new:
                        os.kill(pid, signal.SIGKILL)
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_worker_when_busy)
        killer.start()
        with pytest.raises(StageFailed) as e:
            conv.convert(tiny.artifact, "tflite", "none", tmp_path / "a", tiny.x_train[:50])
        killer.join()
        assert e.value.status == "conversion_failed" and "killed by SIGKILL" in e.value.reason
        art = conv.convert(tiny.artifact, "tflite", "none", tmp_path / "b", tiny.x_train[:50])
        assert art.format == "tflite" and art.path.exists() and art.size_bytes > 0
        # converter chatter went to the log, not to the user's terminal
        assert "--- convert" in (tmp_path / "convert.log").read_text()
    finally:
        conv.close()
    assert not (_worker_pids() - before)


def test_a_conversion_past_its_timeout_is_stopped(tiny, tmp_path):
    # (the next conversion's fresh worker: test_a_killed_converter_is_a_result_and_the_next_one_works)
    before = _worker_pids()
    with IsolatedConverter(tmp_path / "convert.log", timeout_s=0.5) as conv:
        with pytest.raises(StageFailed) as e:
            conv.convert(tiny.artifact, "onnx", "none", tmp_path / "a", None)
        assert e.value.status == "timeout" and "--timeout" in e.value.reason
        assert not (_worker_pids() - before), "the worker past its timeout was stopped"


def test_lanes_convert_each_framework_in_its_own_worker_and_keep_failures_per_conversion(tiny, tmp_path):
    """convert/lanes.py: two source frameworks, two warm workers side by side; a conversion that fails is
    that conversion's result only, raised to whoever asks for it."""
    from dataclasses import replace

    from deploytool.convert.lanes import ConversionLanes

    broken = tmp_path / "broken.keras"
    broken.write_bytes(b"not a zip")
    other = replace(tiny.artifact, framework="torch")  # the same Keras file, queued as another framework's
    before = _worker_pids()
    with ConversionLanes(tmp_path / "logs", "run1") as lanes:
        bad = lanes.prefetch(replace(tiny.artifact, path=broken), "tflite", "none", tmp_path / "bad", None)
        good = lanes.prefetch(other, "tflite", "none", tmp_path / "good", tiny.x_train[:50])
        again = lanes.prefetch(other, "tflite", "none", tmp_path / "good", tiny.x_train[:50])
        assert again is good  # one conversion per output folder
        workers = set()
        while not (bad.done() and good.done()):
            workers |= _worker_pids() - before
            time.sleep(0.05)
        lanes.drain()
        assert len(workers) >= 2  # one worker per framework, both started before either was done
        with pytest.raises(StageFailed) as e:
            lanes.wait_for(tmp_path / "bad")
        # a converter's error keeps its type and message across the process boundary
        assert e.value.status == "conversion_failed" and "tf.lite.TFLiteConverter" in e.value.reason
        art = lanes.wait_for(tmp_path / "good")
        assert art is not None and art.format == "tflite" and art.path.exists()
        assert lanes.wait_for(tmp_path / "never-queued") is None
        assert (tmp_path / "logs" / "convert-run1.log").exists() and (tmp_path / "logs" / "convert-torch-run1.log").exists()
    assert not (_worker_pids() - before)



def test_runs_inside_shared_converters_convert_in_one_worker_each_in_its_own_log(tiny, tmp_path):
    """convert/lanes.py shared_converters: a second run's conversion goes to the worker the first run started
    (TensorFlow imported once), its output to the second run's log; the block's end stops the worker."""
    from deploytool.convert.lanes import ConversionLanes, shared_converters

    before = _worker_pids()
    with shared_converters():
        with ConversionLanes(tmp_path / "logs", "run1") as lanes:
            assert lanes.convert(tiny.artifact, "tflite", "none", tmp_path / "a", None).path.exists()
            (first,) = _worker_pids() - before
        assert _worker_pids() - before == {first}  # kept between the runs
        with ConversionLanes(tmp_path / "logs", "run2") as lanes:
            assert lanes.convert(tiny.artifact, "tflite", "fp16", tmp_path / "b", None).path.exists()
            assert _worker_pids() - before == {first}
    assert not (_worker_pids() - before)
    one, two = ((tmp_path / "logs" / f"convert-run{i}.log").read_text() for i in (1, 2))
    assert "tflite/none" in one and "tflite/fp16" not in one
    assert "tflite/fp16" in two and "tflite/none" not in two


def test_a_conversion_ahead_waits_for_another_run_making_its_folder_and_takes_what_it_made(tiny, tmp_path):
    """convert/lanes.py and workspace.made_by_one: while another run on this workspace makes a folder (it holds the
    folder's lock), a conversion queued for the same folder waits, then takes what was made: it neither empties the
    folder under the other run's feet nor converts it again (no conversion worker is started)."""
    import shutil

    from deploytool.convert.lanes import ConversionLanes
    from deploytool.workspace import made_by_one

    with ConversionLanes(tmp_path / "logs", "first") as lanes:
        made = lanes.convert(tiny.artifact, "tflite", "none", tmp_path / "made", None)
    out = tmp_path / "artifacts" / "k"
    before = _worker_pids()
    with ConversionLanes(tmp_path / "logs", "second") as lanes:
        with made_by_one(out):  # the other run, mid-conversion
            job = lanes.prefetch(tiny.artifact, "tflite", "none", out, None)
            time.sleep(0.5)
            assert not job.done()
            shutil.copytree(tmp_path / "made", out)
            (out / "written-by-the-other-run").touch()
        art = job.result(timeout=30)
        assert art.format == "tflite" and art.sha256 == made.sha256
        assert (out / "written-by-the-other-run").exists()
        assert not (_worker_pids() - before)
