"""The contract tests cover the registries: every runtime registry entry is a
parameter of a runtime contract test (this tier, or the device tier for the
browser and the phone), every target (the built-in ones and one registered by
a test) of the target tests, every converter route of the converter tests.
Read from the tests' own parametrize marks, so a test narrowed by hand fails here.
"""

from __future__ import annotations

import importlib
import itertools
import sys
from pathlib import Path

from deploytool import convert, runtimes, targets
from tests.contract import registry_cases as cases

HERE = Path(__file__).resolve().parent
INTEGRATION = HERE.parent / "integration"


def _params(module, test: str) -> list:
    marks = [m for m in getattr(getattr(module, test), "pytestmark", []) if m.name == "parametrize"]
    assert marks, f"{module.__name__}.{test} is not parametrised"
    return [getattr(v, "values", (v,))[0] for v in marks[0].args[1]]


def _module(folder: Path, name: str):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))  # as pytest's rootdir-relative import does for the test folders
    return importlib.import_module(name)


def covered_runtime_keys() -> set[tuple[str, str, str]]:
    fast = _module(HERE, "test_contract_runtimes")
    devices = _module(INTEGRATION, "test_contract_devices")
    return {*_params(fast, "test_runtime_keeps_the_contract"),
            *_params(fast, "test_runtime_options_are_checked_or_harmless"),
            *_params(devices, "test_device_runtime_keeps_the_contract")}


def uncovered(keys) -> list[tuple[str, str, str]]:
    covered = covered_runtime_keys()
    return [k for k in keys if k not in covered]


def test_every_runtime_registry_entry_has_a_contract_test():
    assert uncovered(runtimes.REGISTRY) == []


def test_a_new_runtime_without_a_contract_test_is_caught():
    new = ("contract-new-target", "onnx", "some-runtime")
    assert uncovered([*runtimes.REGISTRY, new]) == [new]


def test_out_of_process_runtimes_have_a_device_suite():
    for key in cases.runtime_keys():
        if not cases.in_process(key):
            assert key[0] in cases.DEVICE_SUITES, (f"{key}: an out-of-process runtime on a target with no device "
                                                   "fixture in tests/integration/test_contract_devices.py")


def test_every_target_builtin_and_registered_has_contract_tests():
    mod = _module(HERE, "test_contract_targets")
    builtin = ("pc", "host", "web", "android")
    for test in ("test_options_refuse_an_unknown_key_in_one_line", "test_cli_flags_round_trip_through_reproduce_args",
                 "test_positions_for_every_format_it_runs", "test_target_has_a_runtime_for_every_format"):
        params = _params(mod, test)
        assert set(targets.names()) <= set(params) and set(builtin) <= set(params) and "fake" in params, test
    runtime_targets = {k[0] for k in covered_runtime_keys()}
    assert set(targets.names()) <= runtime_targets, "a target whose runtimes no contract test runs"


def test_every_converter_route_has_a_contract_test():
    mod = _module(HERE, "test_contract_converters")
    routes = _params(mod, "test_route_converts_or_says_why")
    others = _params(mod, "test_other_combinations_are_refused_in_one_line_or_alias_a_route")
    assert set(routes) == {(s, f, q) for s in convert.SOURCE_FORMATS for f in convert.FORMATS
                           for q in convert.quantize_modes(s, f)}
    everything = set(itertools.product(convert.SOURCE_FORMATS, convert.FORMATS, convert.QUANTIZE_WORDS))
    assert set(routes) | set(others) == everything and not set(routes) & set(others)
    # every artifact format a runtime runs has a tiny model to run
    from tests.contract.model_cache import FOR_FORMAT

    assert {f for (_, f, _) in runtimes.REGISTRY} <= set(FOR_FORMAT)
