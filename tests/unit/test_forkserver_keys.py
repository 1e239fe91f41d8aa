"""proc.forkserver's choice of server: one per preload and import-time settings, none without a preload. No process
is started here (a server starts on its first fork: tests/integration/test_forkserver.py)."""

from __future__ import annotations

from deploytool.proc import forkserver

WELCOME = {"TFDF_DISABLE_WELCOME_MESSAGE": "1"}


def _second(frameworks, env, modules=()):
    """The context for a worker of this kind, asked for twice: the same both times."""
    first = forkserver.context(frameworks, env, modules)
    second = forkserver.context(frameworks, env, modules)
    assert second is first
    return second


def test_nothing_to_preload_is_a_spawned_worker():
    for _ in range(2):
        assert forkserver.context((), {}) is None
        assert forkserver.context(("onnxruntime",), {}) is None  # not a framework a server imports


def test_one_server_per_preload_and_import_time_settings(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = _second(("tensorflow",), WELCOME, ("deploytool.runtimes.isolated",))
    assert tf is not None and tf.server.preload == ("tensorflow", "deploytool.runtimes.isolated")
    assert forkserver.context(["tensorflow", "tensorflow"], WELCOME, ["deploytool.runtimes.isolated"]) is tf
    # what the worker's own environment adds is set where ours does not say: here ours says 3 already
    assert forkserver.context(("tensorflow",), {**WELCOME, "TF_CPP_MIN_LOG_LEVEL": "2"},
                              ("deploytool.runtimes.isolated",)) is tf
    both = _second(("torch", "tensorflow"), WELCOME)
    assert both is not None and both.server.preload == ("tensorflow", "torch")
    monkeypatch.setenv("DEPLOYTOOL_PLUGINS", "tests.plugin_runtime")  # read by the worker later, not at import
    assert forkserver.context(("tensorflow",), WELCOME, ("deploytool.runtimes.isolated",)) is tf
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")  # read by TensorFlow when imported: another server
    other = _second(("tensorflow",), WELCOME, ("deploytool.runtimes.isolated",))
    assert other is not None and other is not tf and other.server.env == WELCOME
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert _second(("tensorflow",), WELCOME, ("deploytool.runtimes.isolated",)) not in (tf, other)


def test_a_process_of_a_context_carries_its_servers_key_into_the_child():
    ctx = _second(("torch",), {"PROBE_KEY": "1"})
    assert ctx is not None
    p = ctx.Process(target=print)
    assert p.server_key == ctx.key and p._start_method == "forkserver"
    assert ctx.get_start_method() == "forkserver"
