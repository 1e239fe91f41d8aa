"""Every registered target (targets.names(), with the fake target a test
registers): its Options refuse an unknown key in one line naming it; its CLI
flags round-trip (reproduce_args parsed back by a fresh parser and
options_from_cli give the same options and position); it offers positions
for every format it runs; and every format it names has a runtime that runs it.
"""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from deploytool import runtimes, targets
from deploytool.errors import UnknownOption
from deploytool.targets import Preflight, Target
from tests.contract import registry_cases as cases
from tests.contract.runtime_contract import one_line

NAMES = cases.target_names()
# Flags a user might give, beyond none at all, for targets whose axes they widen (others: no extra flags).
SAMPLE_ARGV = {"web": [["--backend", "all"], ["--backend", "cpu,webgl"]],
               "android": [["--delegate", "gpu", "--benchmark-model", "/opt/bm/benchmark_model"],
                           ["--device", "emulator-5554", "--device", "R58M"]],
               "fake": [["--fake-offset", "2.5"]]}
# Option fields that are matrix axes: a reproduced row names one point on them, not the user's whole list.
AXIS_FIELDS = ("devices", "backends", "boards")
# Where a target's preflight would find devices, the round trip uses these instead of a real search.
DEVICES = Preflight(devices=("contract-serial-1", "contract-serial-2"))


def parse(target: Target, argv: list[str]):
    parser = argparse.ArgumentParser(exit_on_error=False)
    target.add_cli_options(parser)
    return target.options(target.options_from_cli(parser.parse_args(argv)))


def preflight(target: Target, options) -> Preflight:
    found = target.preflight(options, run=False)
    return found if found.devices else dataclasses.replace(found, devices=DEVICES.devices)


def target_problems(name: str) -> list[str]:
    """Why a target cannot run anything: no format, or a format whose runtime does not run it."""
    t = targets.get_target(name)
    if not t.formats():
        return [f"the {name} target has no runtime in runtimes.REGISTRY"]
    problems = []
    for fmt in t.formats():
        for runtime in runtimes.runtimes_for(name, fmt):
            cls = runtimes.runtime_class(name, fmt, runtime)
            if fmt not in cls.formats:
                problems.append(f"{name}/{fmt}/{runtime}: {cls.__name__} runs only {cls.formats}")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_options_refuse_an_unknown_key_in_one_line(name):
    t = targets.get_target(name)
    assert t.name == name
    t.options()  # the defaults are valid
    with pytest.raises(UnknownOption) as e:
        t.options({"no_such_key": 1})
    assert "no_such_key" in one_line(e.value)


@pytest.mark.parametrize("name", NAMES)
def test_cli_flags_round_trip_through_reproduce_args(name):
    t = targets.get_target(name)
    for argv in [[], *SAMPLE_ARGV.get(name, [])]:
        options = parse(t, argv)
        for fmt in t.formats():
            for position in t.positions(options, preflight(t, options), fmt):
                again_argv = t.reproduce_args(options, position)
                again = parse(t, again_argv)
                # The reproduced row is on the same axes, and reproducing it again gives the same flags.
                assert position in t.positions(again, preflight(t, again), fmt), (argv, fmt, position, again_argv)
                assert t.reproduce_args(again, position) == again_argv
                assert parse(t, t.reproduce_args(again, position)) == again
                # What the axes do not select survives the round trip.
                kept = {k: v for k, v in options.to_dict().items() if k not in AXIS_FIELDS}
                assert {k: again.to_dict()[k] for k in kept} == kept, (argv, again_argv)


@pytest.mark.parametrize("name", NAMES)
def test_positions_for_every_format_it_runs(name):
    t = targets.get_target(name)
    options = t.options()
    for fmt in t.formats():
        positions = t.positions(options, preflight(t, options), fmt)
        assert positions and all(isinstance(p, targets.Position) for p in positions), (fmt, positions)
        assert len(set(positions)) == len(positions), f"{fmt}: a position twice in {positions}"


@pytest.mark.parametrize("name", NAMES)
def test_target_has_a_runtime_for_every_format(name):
    assert target_problems(name) == []


def test_a_target_without_a_runtime_is_caught():
    class Orphan(Target):
        name = "contract-orphan"

    targets.register(Orphan())
    try:
        assert target_problems("contract-orphan") == ["the contract-orphan target has no runtime in runtimes.REGISTRY"]
    finally:
        targets.unregister("contract-orphan")


@pytest.mark.parametrize("name", NAMES)
def test_a_session_starts_nothing_and_its_options_are_runtime_options(name):
    """What a run's rows share (Target.session) is opened around every run, also runs with nothing left
    to do: it must start nothing by itself, and what it adds must be options the target's runtimes take."""
    import psutil

    from deploytool.targets import RunSettings

    t = targets.get_target(name)
    options = t.options()
    me = psutil.Process()
    before = set(me.children(recursive=True))
    with t.session(options, preflight(t, options)) as shared:
        assert isinstance(shared, dict)
        assert set(me.children(recursive=True)) == before, "a session started a process before any row asked"
        for fmt in t.formats():
            position = t.positions(options, preflight(t, options), fmt)[0]
            for runtime in runtimes.runtimes_for(name, fmt):
                cls = runtimes.runtime_class(name, fmt, runtime)
                cls(**{**t.runtime_options(options, RunSettings(), position), **shared}).close()
