"""A lab worker advertises what each target says this machine offers it (`Target.local_resources`): a new target
needs no edit to the lab's engine, and a part that is missing (no browser, no phone) is not offered, not an error."""

from __future__ import annotations

import pytest

from deploytool import targets
from deploytool.errors import DeviceNotFound, HarnessMissing
from deploytool.lab import engine
from deploytool.targets import Position, Target
from deploytool.devices import adb
from deploytool.targets import web


class BoardTarget(Target):
    name = "test-board"
    label = "a test board"

    def resource(self, position: Position) -> str:
        return "test-board"

    def local_resources(self, browsers: int = 1) -> dict[str, float]:
        return {"test-board": 2}


@pytest.fixture
def board():
    targets.register(BoardTarget())
    yield
    targets.unregister("test-board")


def test_each_target_says_what_this_machine_offers_its_rows(monkeypatch, board):
    monkeypatch.setattr(web, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(web, "check_harness", lambda: None)
    monkeypatch.setattr(adb, "select_devices", lambda all_devices=False: ["emulator-5554", "R58M"])
    got = engine.local_resources(browsers=3)
    assert got == {"host": 1, "chromium": 3, "android-emulator-5554": 1, "android-R58M": 1, "test-board": 2}
    assert list(got) == ["host", "chromium", "android-emulator-5554", "android-R58M", "test-board"]


def test_what_is_missing_is_not_offered(monkeypatch):
    def no_harness():
        raise HarnessMissing("the web harness is not built")

    def no_phone(all_devices=False):
        raise DeviceNotFound("no device")

    monkeypatch.setattr(web, "find_chromium", lambda: "/usr/bin/chromium")
    monkeypatch.setattr(web, "check_harness", no_harness)
    monkeypatch.setattr(adb, "select_devices", no_phone)
    assert engine.local_resources() == {"host": 1}
    assert engine.local_resources(browsers=0) == {"host": 1}
