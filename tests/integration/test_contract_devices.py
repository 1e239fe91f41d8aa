"""The runtime contract (tests/contract/runtime_contract.py) for every runtime
registry entry that runs outside this process: the web runtimes in real
headless Chromium, the Android runtime over the real adb server against the
device simulator (tests/android_sim). Parametrised over runtimes.REGISTRY like
tests/contract; the tiny models come from the same cache (~/.cache/deploytool/tests/test-models/).
"""

from __future__ import annotations

import pytest

from tests.android_sim import BENCHMARK_MODEL_DOUBLE
from tests.contract import registry_cases as cases
from tests.contract.runtime_contract import N_SAMPLES, check_lifecycle, check_refuses_bad_options, runtime_options
from tests.integration.test_android import adb_server, phone  # noqa: F401 - the simulator's fixtures, reused

pytestmark = pytest.mark.slow  # the integration tier: real frameworks, processes and files

PARAMS = [pytest.param(key, id=cases.key_id(key), marks=getattr(pytest.mark, mark))
          for target, mark in cases.DEVICE_SUITES.items() for key in cases.device_keys(target)]


@pytest.fixture(scope="module")
def models():
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    yield cache
    cache.close()


def target_options(target: str, request: pytest.FixtureRequest) -> dict:
    """The target's options that reach its test device (one entry per DEVICE_SUITES target)."""
    if target == "web":
        return {}  # the web target's own preflight finds /usr/bin/chromium and the harness
    if target == "android":
        sim = request.getfixturevalue("phone")
        return {"devices": (sim.serial,), "benchmark_binary": str(BENCHMARK_MODEL_DOUBLE)}
    raise LookupError(f"no test device for the {target} target: add it here and to registry_cases.DEVICE_SUITES")


@pytest.mark.parametrize("key", PARAMS)
def test_device_runtime_keeps_the_contract(key, models, request):
    art = models.for_format(key[1])
    options = runtime_options(key, target_options(key[0], request))
    check_lifecycle(key, art, models.inputs(art, N_SAMPLES), options)


@pytest.mark.parametrize("key", PARAMS)
def test_device_runtime_refuses_bad_options(key, request):
    check_refuses_bad_options(key, runtime_options(key, target_options(key[0], request)))
