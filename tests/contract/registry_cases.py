"""The contract tests' parameters, read from the registries themselves (with
the test-registered fake target of tests/fake_target.py in them): every
runtime registry entry, every target, every converter route. A new runtime,
target or route is a new parametrisation, with no test written for it.

Runtimes that run in this process are tested in tests/contract (the fast
tier); the others need a device fixture (a browser, the Android simulator)
and are tested in tests/integration/test_contract_devices.py, which has one
fixture per target in DEVICE_SUITES. An out-of-process runtime on a target
with no suite fails the coverage test.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from deploytool import convert, runtimes, targets

# target -> the pytest mark of the device suite that runs its out-of-process runtimes
DEVICE_SUITES = {"web": "browser", "android": "android"}


@contextmanager
def fake_registered() -> Iterator[None]:
    """The fake target and its runtime in the registries, for as long as the block lasts."""
    from tests import fake_target  # registers on import

    fake_target.register()
    try:
        yield
    finally:
        fake_target.unregister()


def runtime_keys() -> list[tuple[str, str, str]]:
    """Every (target, artifact format, runtime name) in runtimes.REGISTRY."""
    with fake_registered():
        return list(runtimes.REGISTRY)


def in_process(key: tuple[str, str, str]) -> bool:
    with fake_registered():
        return runtimes.runtime_class(*key).in_process


def in_process_keys() -> list[tuple[str, str, str]]:
    return [k for k in runtime_keys() if in_process(k)]


def device_keys(target: str) -> list[tuple[str, str, str]]:
    return [k for k in runtime_keys() if k[0] == target and not in_process(k)]


def target_names() -> list[str]:
    with fake_registered():
        return targets.names()


def routes() -> list[tuple[str, str, str]]:
    """Every (source format, format word, quantize word) that `--quantize all` converts."""
    return [(s, f, q) for s in convert.SOURCE_FORMATS for f in convert.FORMATS
            for q in convert.quantize_modes(s, f)]


def non_routes() -> list[tuple[str, str, str]]:
    """Every other (source, format, quantize) a user can type: refused by plan(), or an alias of a route."""
    real = set(routes())
    return [(s, f, q) for s in convert.SOURCE_FORMATS for f in convert.FORMATS for q in convert.QUANTIZE_WORDS
            if (s, f, q) not in real]


def key_id(key: tuple[str, ...]) -> str:
    return "/".join(key)
