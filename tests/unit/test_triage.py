"""Triage pins its rules: a deploytool (or plugin) frame is deploytool's bug whatever the message; an output
mismatch of as many values per sample is deploytool contradicting itself; a tool's "no conversion / no kernel /
needs Flex" is a coverage gap; a package outside its own pins makes a finding unconfirmed; the rest is an
upstream candidate. Evidence (`Raised`) keeps the frames of the process that raised, across a worker."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from deploytool.bugs import findings
from deploytool.bugs.triage import (
    MIN_PEERS,
    PEER_FACTOR,
    Environment,
    mismatches,
    peer_outliers,
    raising_frame,
    tool_words,
    triage,
)
from deploytool.errors import Frame, NoConversion, OutputMismatch, Raised, StageFailed, ToolFailed
from deploytool.result import Combo, Result, Triage
from deploytool.proc.worker import Worker
from tests import results as factory

SITE = "/venv/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"
ENV = Environment(versions={"onnx2tf": "1.29.24", "numpy": "2.1.3", "onnxruntime": "1.32.0", "tensorflow": "2.19.0"},
                  requires={"onnx2tf": ("numpy==1.26.4", "onnxruntime==1.23.0", "opencv-python==4.11"),
                            "onnxruntime": ("numpy>=1.21",), "tensorflow": ("numpy<2.2,>=1.26",)},
                  distributions={"onnx2tf": "onnx2tf", "onnxruntime": "onnxruntime", "tensorflow": "tensorflow"})


def _frames(*where: tuple[str, str]) -> tuple[Frame, ...]:
    return tuple(Frame(f"{root}/{name}.py", 10 + i, f"fn{i}", pkg) for i, (root, name, pkg) in
                 enumerate((_root(p), n, p) for p, n in where))


def _root(package: str) -> str:
    return {"deploytool": "/src/deploytool", "python": STDLIB, "": "/src/tests"}.get(package, f"{SITE}/{package}")


def _row(status: str = "conversion_failed", reason: str = "x", exception: str = "ValueError", message: str = "bad",
         frames: tuple[Frame, ...] = (), **fields) -> Result:
    raised = Raised(exception, message, frames) if exception else None
    return factory.result(status=status, reason=reason, raised=raised, **fields)


def test_a_frame_of_deploytool_is_its_own_bug_whatever_the_message():
    row = _row("error", "AttributeError: 'dict' object has no attribute 'numpy'", "AttributeError",
               "'dict' object has no attribute 'numpy'",
               _frames(("deploytool", "run/runner"), ("tensorflow", "framework/ops"), ("deploytool", "runtimes/keras")))
    t = triage(row, ENV, ("tensorflow",))
    assert t.raised_at is not None
    assert t.klass == "internal_error" and t.raised_at.package == "deploytool" and "runtimes/keras" in t.why
    # the standard library's own frames (json.loads raising) are its caller's: still ours
    via_json = replace(row, raised=Raised("json.decoder.JSONDecodeError", "Expecting value",
                                          _frames(("deploytool", "bugs/x"), ("python", "json/decoder"))))
    assert triage(via_json, ENV).klass == "internal_error"
    # a plugin's code (a runtime a test registers: on no site-packages path) is not upstream's either
    plugin = replace(row, raised=Raised("AttributeError", "boom", _frames(("onnxruntime", "x"), ("", "fake_runtime"))))
    assert triage(plugin, ENV).klass == "internal_error"


def test_an_exception_raised_in_a_package_is_not_ours_and_code_it_generated_is_the_package_s():
    row = _row(frames=_frames(("deploytool", "convert/x"), ("onnxruntime", "tools/symbolic_shape_infer")),
               exception="AssertionError", message="")
    t = triage(row, ENV, ("onnxruntime",))
    assert t.raised_at is not None
    assert t.klass == "upstream" and t.raised_at.package == "onnxruntime"
    assert "AssertionError raised at onnxruntime/tools/symbolic_shape_infer.py:11" in t.why  # no words: the frame
    generated = Frame("/tmp/__autograph_generated_fileab12.py", 5, "tf__call", "")
    row = _row(frames=(*_frames(("tensorflow", "eager/execute")), generated), exception="ValueError")
    assert row.raised is not None
    frame = raising_frame(row.raised)
    assert frame is not None and frame.package == "tensorflow" and triage(row, ENV).klass == "upstream"


@pytest.mark.parametrize("message, klass", [
    ("output 'linear' has shape (24, 6), the baseline's (24, 6)", "internal_error"),  # equal: a contradiction
    ("output 'mask' has shape (8, 16, 16, 3), the baseline's (8, 3, 16, 16)", "internal_error"),  # a layout
    ("output 'linear' has shape (1, 6), the baseline's (24, 6)", "internal_error"),  # the samples, not the model
    ("output 'linear' has shape (24, 5), the baseline's (24, 6)", "upstream"),  # the converter changed it
])
def test_an_output_mismatch_of_as_many_values_per_sample_is_deploytool_contradicting_itself(message, klass):
    row = _row("runtime_failed", f"its outputs do not match the PC baseline's: {message}", "OutputMismatch", message,
               _frames(("deploytool", "run/compare")))
    assert triage(row, ENV).klass == klass


def test_coverage_gaps_are_unsupported_with_their_ops_and_what_would_make_them_work():
    no_op = _row(exception="NoConversion", message="onnx2tf has no conversion for the ONNX op TreeEnsembleClassifier",
                 frames=_frames(("onnx2tf", "onnx2tf")))
    assert no_op.raised is not None
    no_op = replace(no_op, raised=replace(no_op.raised, ops=("TreeEnsembleClassifier",), remedy="another converter"))
    t = triage(no_op, ENV, ("onnx2tf",))  # onnx2tf runs outside its pins, but a gap is a gap
    assert t.klass == "unsupported" and t.ops == ("TreeEnsembleClassifier",) and t.remedy == "another converter"
    flex = _row(reason="tf.lite.TFLiteConverter 2.19.0: ConverterError: ...", exception="ConverterError",
                message="Some ops are not supported by the native TFLite runtime, you can enable TF kernels fallback "
                        "using TF Select.\nFlex ops: FlexTensorListReserve\ntf.TensorListReserve(tensor<2xi32>)",
                frames=_frames(("tensorflow", "lite/python/convert")))
    t = triage(flex, ENV, ("tensorflow",))
    assert t.klass == "unsupported" and "TensorListReserve" in t.ops and "SELECT_TF_OPS" in t.remedy
    ort = _row("load_failed", "onnxruntime 1.32.0: NOT_IMPLEMENTED : Could not find an implementation for "
                              "TreeEnsembleClassifier(3) node with name ''", exception="")
    assert triage(ort, ENV).ops == ("TreeEnsembleClassifier",)
    needs_flex = _row("load_failed", "browser: Aborted(To use dlopen, you need enable dynamic linking)", exception="",
                      artifact=factory.artifact(options={"needs_flex": True}))
    assert triage(needs_flex, ENV).klass == "unsupported"
    # a file whose TensorFlow ops deploytool did not ask for (onnx2tf's int8-io): the same gap, whoever made it
    unknown_flex = _row("load_failed", "browser: Aborted(To use dlopen, you need enable dynamic linking, see https://"
                                       "github.com/emscripten-core/emscripten/wiki/Linking)", exception="")
    t = triage(unknown_flex, ENV, ("onnx2tf",))
    assert t.klass == "unsupported" and "Flex delegate" in t.remedy
    skew = _row("load_failed", "browser: Didn't find op for builtin opcode 'FULLY_CONNECTED' version '12'",
                exception="")
    assert triage(skew, ENV).klass == "upstream"  # a known op at a newer version: a compatibility bug, reported


def test_a_package_outside_its_declared_requirements_makes_a_finding_unconfirmed():
    row = _row(exception="AttributeError", message="'NoneType' object has no attribute 'shape'",
               frames=_frames(("deploytool", "convert/_onnx2tf"), ("onnx2tf", "utils/common_functions")))
    t = triage(row, ENV, ("onnx2tf",))
    assert t.klass == "environment" and t.why.startswith("unconfirmed: onnx2tf runs outside its pins")
    assert "onnx2tf 1.29.24 requires numpy==1.26.4, 2.1.3 is installed" in t.mismatches
    assert "onnx2tf 1.29.24 requires opencv-python==4.11, which is not installed" in t.mismatches
    assert t.packages == ("onnx2tf 1.29.24",)
    # the same failure raised by a package inside its pins is an upstream candidate
    inside = replace(row, raised=Raised("AttributeError", "x", _frames(("tensorflow", "lite/python/convert"))))
    assert triage(inside, ENV, ("tensorflow",)).klass == "upstream"
    assert mismatches(["tensorflow", "onnxruntime"], ENV) == ()


def test_triage_travels_with_the_row_and_back():
    t = Triage("unsupported", "no kernel", Frame("/x/site-packages/onnxruntime/a.py", 3, "f", "onnxruntime"),
               ("Gather",), "another opset", (), ("onnxruntime 1.32.0",))
    row = _row(triage=t)
    back = Result.from_json(json.loads(json.dumps(row.to_json())))
    assert back.triage == t and back.raised == row.raised and Triage.from_json({"class": "nonsense"}) is None


def _boom():
    import json as j

    return j.loads("{")


def test_raised_keeps_the_frames_of_the_worker_that_raised():
    with Worker() as w:
        with pytest.raises(Exception) as e:
            w.call(_boom)
    r = Raised.of(e.value)
    assert r.exception == "json.decoder.JSONDecodeError" and r.frames[-1].package == "python"
    frame = raising_frame(r)
    assert frame is not None and frame.function == "_boom"  # past the standard library: this test's own code


def test_a_stage_failure_stands_for_its_cause_and_a_tool_failure_points_where_the_tool_gave_up():
    def tool():
        raise SystemExit(1)

    try:
        try:
            tool()
        except SystemExit as exit_:
            raise ToolFailed("ERROR: the tool printed this") from exit_
    except ToolFailed as e:
        r = Raised.of(StageFailed("conversion_failed", "onnx2tf: ...", Raised.of(e)))
    assert r.name == "ToolFailed" and r.first_line == "ERROR: the tool printed this"
    assert r.frames[-1].function == "tool"  # the tool's frame, not the line that read its output
    try:
        raise NoConversion("no conversion for Foo", ("Foo",), "use bar") from KeyError("Foo")
    except NoConversion as e:
        gap = Raised.of(e)
    assert (gap.name, gap.ops, gap.remedy) == ("NoConversion", ("Foo",), "use bar")
    assert issubclass(OutputMismatch, ValueError)


def test_a_crash_is_one_finding_whatever_the_quantization_and_its_title_speaks_the_tools_words():
    rows = [factory.result("r", f"k{q}", "conversion_failed", combo=Combo("onnx", "tflite", q, "host"),
                           reason="onnx2tf 1.29.24: AttributeError: 'NoneType' object has no attribute 'shape'",
                           raised=Raised("AttributeError", "'NoneType' object has no attribute 'shape'",
                                         _frames(("onnx2tf", "utils/common")))) for q in ("none", "dynamic")]
    a, b = (findings.signature(r, False) for r in rows)
    assert a == b and a.quantize == ""
    accuracy = [factory.result("r", f"m{q}", combo=Combo("onnx", "tflite", q, "host"),
                               comparison=factory.comparison(agreement=0.3, verdict="fail")) for q in ("none", "int8")]
    assert len({findings.signature(r, False).key for r in accuracy}) == 2  # numbers differ by quantization
    assert tool_words(rows[0]) == "AttributeError: 'NoneType' object has no attribute 'shape'"
    assert tool_words(factory.result(status="load_failed", reason="browser: ERROR: Didn't find op")) == \
        "ERROR: Didn't find op"


def test_rows_of_deploytool_bugs_make_no_finding(tmp_path):
    from deploytool.store.sqlite import SqliteStore

    store = SqliteStore(f"sqlite:///{tmp_path / 'r.db'}")
    ours = _row("error", "AttributeError: boom", "AttributeError", "boom", _frames(("deploytool", "runtimes/keras")),
                triage=Triage("internal_error", "ours"))
    theirs = _row(triage=Triage("upstream", "candidate: x"), combo=Combo("keras", "onnx", "none", "host"))
    (f,) = findings.record_run(store, "r1", [ours, theirs], {"numpy": "2"})
    assert f.klass == "upstream" and f.state == "candidate"
    store.confirm_finding(f.id, {"state": "confirmed", "command": "python reproduce.py"})
    (again,) = store.findings()
    assert again.state == "confirmed" and again.confirmation["command"] == "python reproduce.py"


def test_a_quantized_row_of_random_weights_that_drifts_is_expected_and_no_finding():
    """--random-weights (an untrained export, an atlas architecture): a measured quantized row whose outputs drift
    is what quantizing such a model does; an unquantized row's drift, and any row of a trained model, stay
    upstream candidates; a crash stays what it is."""
    int8 = Combo("keras", "tflite", "int8", "host")
    drift = factory.result(key="q", combo=int8, comparison=factory.comparison(agreement=0.5, verdict="fail"))
    t = triage(drift, ENV, ("tensorflow",), random_weights=True)
    assert t.klass == "expected" and "random weights" in t.why
    assert triage(drift, ENV, ("tensorflow",)).klass == "upstream"  # trained: a candidate
    float_row = replace(drift, combo=Combo("keras", "tflite", "none", "host"))
    assert triage(float_row, ENV, random_weights=True).klass == "upstream"  # float routes must match
    crash = _row("error", "RuntimeError: bad", "RuntimeError", "bad", _frames(("tensorflow", "lite/interpreter")),
                 combo=int8)
    assert triage(crash, ENV, ("tensorflow",), random_weights=True).klass == "upstream"
    assert Triage.from_json(t.to_json()) == t  # stored and read back
    drift.triage, float_row.triage = t, triage(float_row, ENV, random_weights=True)
    assert [r.combo.quantize for r, _ in findings.failing_signatures([drift, float_row])] == ["none"]


def test_a_process_the_out_of_memory_killer_ended_is_this_machines_state_not_a_bug():
    row = _row("conversion_failed", "the converter process crashed converting to tflite/dynamic (killed by SIGKILL by "
                                    "the kernel's out-of-memory killer: it needed more memory than this machine's 24 GiB)",
               exception="")
    t = triage(row, ENV, ("onnx2tf",))  # onnx2tf outside its pins: still the machine's memory first
    assert t.klass == "environment" and t.why.startswith("this machine ran out of memory")


def test_a_row_past_its_time_limit_is_not_filed_upstream():
    # ViT-B/16's int8 TFLite in tfjs-tflite took over 10 s an inference: 64 samples ran past the atlas' 900 s
    row = _row("timeout", "the browser did not finish the run within timeout_s=900 (the whole test set's chunks "
                          "together)", exception="")
    t = triage(row, ENV, ())
    assert t.klass == "environment" and "time limit" in t.why and "--timeout" in t.why


def _route(fmt: str, quantize: str, error: float, sha: str, target: str = "host", runtime: str = "") -> Result:
    combo = Combo("pytorch", fmt, quantize, target, runtime=runtime)
    return factory.result(key=f"{fmt}/{quantize}/{target}/{runtime}", combo=combo,
                          comparison=factory.comparison(mean_abs_error=error, verdict="fail"),
                          artifact=factory.artifact(fmt=fmt, quantize=quantize, sha256=sha * 32))


def test_a_quantized_route_far_off_its_peers_in_the_same_mode_is_not_explained_by_random_weights():
    """A route's file whose mean error is more than PEER_FACTOR (4) times the median of at least MIN_PEERS (2)
    other files' in its mode, on the same model and target, is singled out; int8-io rounds as int8 does; one file
    run by two runtimes is one route (its runtimes are not each other's peers); other modes, targets and routes
    within the factor are left alone. (The atlas' MobileNetV2: litert-torch int8 13.3 against 1.28, 1.27, 1.28.)"""
    assert (PEER_FACTOR, MIN_PEERS) == (4.0, 2)
    rows = [_route("tflite", "int8", 13.3, "a"), _route("tflite", "int8", 13.1, "a", runtime="tensorflow"),
            _route("onnx", "int8", 1.28, "b"), _route("tflite-onnx2tf", "int8", 1.27, "c"),
            _route("tflite-onnx2tf", "int8-io", 1.28, "d"),
            _route("onnx", "dynamic", 1.28, "e"), _route("tflite", "dynamic", 1.16, "f"),
            _route("tflite-onnx2tf", "dynamic", 0.68, "g"),  # 2.3x: the spread random weights give
            _route("tflite", "int8", 13.3, "h", target="web")]  # alone on its target: no peers there
    found = peer_outliers(rows)
    assert sorted(found) == ["tflite/int8/host/", "tflite/int8/host/tensorflow"]
    why, bound = found["tflite/int8/host/"]
    assert bound == pytest.approx(4 * 1.28)  # what its bare reproducer holds the file's mean error to
    assert why.startswith("tf.lite.TFLiteConverter to tflite/int8: mean error 13.2, 10.3x the median of the 3 other "
                          "int8 routes given the same weights and calibration"), why
    assert "to onnx/int8 1.28" in why and "to tflite-onnx2tf/int8-io 1.28" in why
    # at exactly the factor, or with one peer only, nothing is said
    assert peer_outliers([_route("tflite", "int8", 4.0, "a"), _route("onnx", "int8", 1.0, "b"),
                          _route("tflite-onnx2tf", "int8", 1.0, "c")]) == {}
    assert peer_outliers([_route("tflite", "int8", 13.3, "a"), _route("onnx", "int8", 1.0, "b")]) == {}
    # a float route and an unmeasured row take no part
    assert peer_outliers([_route("tflite", "none", 9.0, "a"), _route("onnx", "none", 0.0, "b"),
                          _route("tflite-onnx2tf", "none", 0.0, "c")]) == {}
