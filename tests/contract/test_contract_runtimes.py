"""Every in-process runtime in runtimes.REGISTRY keeps the runtime contract
(tests/contract/runtime_contract.py) on a tiny model of its format; the
browser and phone runtimes keep the same contract in
tests/integration/test_contract_devices.py."""

from __future__ import annotations

import pytest

from tests.contract import registry_cases as cases
from tests.contract.runtime_contract import N_SAMPLES, check_lifecycle, check_refuses_bad_options, runtime_options

KEYS = cases.in_process_keys()


@pytest.mark.parametrize("key", KEYS, ids=cases.key_id)
def test_runtime_keeps_the_contract(key, models):
    art = models.for_format(key[1])
    check_lifecycle(key, art, models.inputs(art, N_SAMPLES), runtime_options(key))


@pytest.mark.parametrize("key", KEYS, ids=cases.key_id)
def test_runtime_options_are_checked_or_harmless(key):
    check_refuses_bad_options(key, runtime_options(key))
