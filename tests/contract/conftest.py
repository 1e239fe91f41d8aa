"""Fixtures of the contract tier: the cache of tiny models (~/.cache/deploytool/tests/test-models/)
and the fake target of tests/fake_target.py registered around every test, as
it was when the parameters were read from the registries."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def models():
    from tests.contract.model_cache import ModelCache

    cache = ModelCache()
    yield cache
    cache.close()


@pytest.fixture(autouse=True)
def fake_target_registered():
    from tests.contract.registry_cases import fake_registered

    with fake_registered():
        yield
