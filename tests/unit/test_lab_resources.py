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


def test_a_runaway_night_is_refused_before_a_cluster_starts(tmp_path, monkeypatch):
    """`threads = [1..1000]` is one line before Dask starts: a cluster started only to be stopped at once can
    outlive its shutdown timeout on a busy machine and print Dask's leftovers after the line (seen at -n 3)."""
    from deploytool.errors import UnknownOption
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.workspace import Workspace

    path = tmp_path / "lab.toml"
    path.write_text('[lab]\nname = "h"\n[[models]]\nname = "lenet1"\nframeworks = ["keras"]\n\n'
                    f'[matrix]\nthreads = {list(range(1, 1001))}\n')

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started for a night that is refused")

    monkeypatch.setattr(engine, "client", no_cluster)
    with pytest.raises(UnknownOption, match=r"plans \d{4,} cells .* more than \[lab\] max_cells = 5000"):
        run_night(load_lab(path), Workspace(tmp_path / "ws"), store=None, log=lambda s: None)  # type: ignore[arg-type]
