"""Device selectors (serial, model:, abi:, every) resolve against the facts the
lab's workers tell; a lab file with an unknown selector kind is one line naming
the file and the field."""

from __future__ import annotations

import pytest

from deploytool.devices.selectors import parse, resolve
from deploytool.errors import SpecError, UnknownOption

PHONES = {"A1": {"model": "Pixel 7", "abi": "arm64-v8a"}, "B2": {"model": "Galaxy A10", "abi": "armeabi-v7a"},
          "127.0.0.1:5555": {"model": "Pixel 7", "abi": "x86_64"}}


def test_a_bare_serial_and_a_network_serial_are_serials_and_a_kind_is_parsed():
    assert parse("emulator-5554") == ("serial", "emulator-5554")
    assert parse("127.0.0.1:5555") == ("serial", "127.0.0.1:5555")
    assert parse("localhost:5555") == ("serial", "localhost:5555")
    assert parse("serial:127.0.0.1:5555") == ("serial", "127.0.0.1:5555")
    assert parse("model:Pixel 7") == ("model", "Pixel 7")
    assert parse("every") == ("every", "")
    with pytest.raises(UnknownOption, match="unknown kind 'modle'"):
        parse("modle:Pixel 7")


def test_selectors_resolve_to_serials_once_each_and_unmatched_ones_are_named():
    got = resolve(("model:Pixel 7", "abi:arm64-v8a", "serial:Z9", "model:Pixel 9"), PHONES)
    assert got.serials == ("127.0.0.1:5555", "A1", "Z9")  # A1 matched twice, kept once; Z9 may be plugged in yet
    assert list(got.unmatched) == ["model:Pixel 9"] and "Pixel 9" in got.unmatched["model:Pixel 9"]
    assert resolve((), PHONES).serials == resolve(("every",), PHONES).serials == tuple(sorted(PHONES))
    assert list(resolve(("abi:arm64-v8a",), {}).unmatched) == ["abi:arm64-v8a"]


def test_a_lab_file_with_an_unknown_selector_kind_is_one_line_naming_file_and_field(tmp_path):
    from deploytool.lab.labfile import load_lab

    lab = tmp_path / "lab.toml"
    lab.write_text('[[models]]\nname = "lenet5"\n[matrix]\ntargets = ["android"]\n'
                   '[target_options.android]\ndevices = ["abi:arm64-v8a", "modle:Pixel 7"]\n')
    with pytest.raises(SpecError) as e:
        load_lab(lab)
    msg = str(e.value)
    assert "\n" not in msg and str(lab) in msg and "target_options.android" in msg and "'modle'" in msg, msg
    lab.write_text(lab.read_text().replace("modle:", "model:"))
    assert load_lab(lab).target_options["android"]["devices"] == ["abi:arm64-v8a", "model:Pixel 7"]
