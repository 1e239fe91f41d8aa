"""Device selectors in a lab night on the embedded LocalCluster: its worker owns
the simulated phone (the ADB device simulator, a TEST DOUBLE of a phone speaking
the real ADB protocol to the real adb server) and tells its model and ABI from
getprop; `model:` and `abi:` selectors resolve to its serial, and a model no
phone has is a `no_worker` row naming the selector, not a row left out. The
same selectors choose phones for `migrate --device`."""

from __future__ import annotations

import pytest

from tests.integration.test_android import BENCHMARK_MODEL_DOUBLE, adb_server, phone  # noqa: F401
from tests.integration.test_lab_cluster import SMALL

pytestmark = [pytest.mark.android, pytest.mark.slow]


def test_model_and_abi_selectors_resolve_to_the_phone_and_an_unmatched_model_is_no_worker(
        lenet5_workspace, phone, tmp_path):  # noqa: F811
    from deploytool.lab.labfile import load_lab
    from deploytool.lab.night import run_night
    from deploytool.store import SqlAlchemyStore

    ws, *_ = lenet5_workspace
    model = phone.props["ro.product.model"]
    selectors = [f"model:{model}", f"abi:{phone.props['ro.product.cpu.abi']}", "model:Pixel 7"]
    text = SMALL.replace('targets = ["host"]', 'targets = ["android"]').replace('runtimes = ["lab-double"]', "") + \
        f'\n[target_options.android]\ndevices = {selectors!r}\nbenchmark_binary = "{BENCHMARK_MODEL_DOUBLE}"\n'
    (tmp_path / "lab.toml").write_text(text.replace("'", '"'))
    out = run_night(load_lab(tmp_path / "lab.toml"), ws, SqlAlchemyStore(f"sqlite:///{tmp_path / 'lab.db'}"), "n1",
                    progress=False, log=lambda s: None, no_worker_timeout_s=3)
    rows = {r.combo.device: r for r in (j.result for j in out.judged)}
    # the model and the ABI both chose this phone (one cell); had either matched nothing, it would be a row of its own
    assert sorted(rows) == sorted([phone.serial, "model:Pixel 7"]), rows
    on_phone = rows[phone.serial]
    assert on_phone.status == "measured", on_phone.reason
    missing = rows["model:Pixel 7"]
    assert missing.status == "no_worker" and "'model:Pixel 7'" in missing.reason, missing.reason
    assert model in missing.reason and phone.serial in missing.reason  # what was there instead


def test_migrate_device_selectors_choose_among_the_ready_phones(phone):  # noqa: F811
    from deploytool.errors import DeviceNotFound
    from deploytool.targets import get_target

    android = get_target("android")
    model = phone.props["ro.product.model"]
    chosen = android.preflight(android.options({"devices": [f"model:{model}", "abi:arm64-v8a"]}))
    assert chosen.devices == (phone.serial,)
    with pytest.raises(DeviceNotFound, match="'abi:x86_64'"):
        android.preflight(android.options({"devices": ["abi:x86_64"]}))
