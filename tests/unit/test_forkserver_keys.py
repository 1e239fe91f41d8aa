"""proc.forkserver's choice of server: one per preload and import-time settings, none without a preload. No process
is started here (a context's server starts on its first worker: tests/integration/test_forkserver.py)."""

from __future__ import annotations

from deploytool.proc import forkserver


def test_nothing_to_preload_is_a_spawned_worker(monkeypatch):
    assert forkserver.context((), {}) is None
    assert forkserver.context(("onnxruntime",), {}) is None  # not a framework a server imports


def test_one_server_per_preload_and_import_time_settings(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = forkserver.context(("tensorflow",), {"TFDF_DISABLE_WELCOME_MESSAGE": "1"})
    assert tf is not None and tf.server.preload == ("tensorflow",)
    assert forkserver.context(["tensorflow", "tensorflow"], {"TFDF_DISABLE_WELCOME_MESSAGE": "1"}) is tf
    # what the worker's own environment adds is set where ours does not say: here ours says 3 already
    assert forkserver.context(("tensorflow",), {"TFDF_DISABLE_WELCOME_MESSAGE": "1",
                                                "TF_CPP_MIN_LOG_LEVEL": "2"}) is tf
    both = forkserver.context(("torch", "tensorflow"), {"TFDF_DISABLE_WELCOME_MESSAGE": "1"})
    assert both is not None and both.server.preload == ("tensorflow", "torch")
    monkeypatch.setenv("DEPLOYTOOL_PLUGINS", "tests.plugin_runtime")  # read by the worker later, not at import
    assert forkserver.context(("tensorflow",), {"TFDF_DISABLE_WELCOME_MESSAGE": "1"}) is tf
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # read by TensorFlow when imported: another server
    other = forkserver.context(("tensorflow",), {"TFDF_DISABLE_WELCOME_MESSAGE": "1"})
    assert other is not None and other is not tf and other.server.env == {"TFDF_DISABLE_WELCOME_MESSAGE": "1"}
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert forkserver.context(("tensorflow",), {"TFDF_DISABLE_WELCOME_MESSAGE": "1"}) not in (tf, other)


def test_a_process_of_a_context_carries_its_servers_key_into_the_child():
    ctx = forkserver.context(("torch",), {"PROBE_KEY": "1"})
    assert ctx is not None
    p = ctx.Process(target=print)
    assert p.server_key == ctx.key and p._start_method == "forkserver"
    assert ctx.get_start_method() == "forkserver"
