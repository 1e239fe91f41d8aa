"""What a user reads when onnx2tf gives up by printing an error and calling
sys.exit: its first real error line, without terminal colours."""

from deploytool.convert._onnx2tf import _printed_error


def test_the_first_error_line_is_the_reason_without_colours():
    printed = ("\x1b[33mWARNING:\x1b[0m something harmless\n"
               "\x1b[31mERROR:\x1b[0m The trace log is below.\n"
               "\x1b[31mERROR:\x1b[0m For INT8 quantization, the input data type must be Float32.\n"
               "\x1b[31mERROR:\x1b[0m second error\n")
    assert _printed_error(printed) == "ERROR: For INT8 quantization, the input data type must be Float32."


def test_without_an_error_line_the_last_printed_line_or_a_default_is_the_reason():
    assert _printed_error("converting\nstep 3 of 9\n\n") == "step 3 of 9"
    assert _printed_error("") == "onnx2tf stopped"
