"""Package versions in provenance and in conversion cache keys: read from the .dist-info folders on sys.path
in one listing, they must be exactly what importlib.metadata says for every installed distribution."""

from __future__ import annotations

from importlib import metadata

from deploytool import provenance


def test_package_versions_are_importlib_metadatas_for_every_installed_distribution():
    names = {d.metadata["Name"] for d in metadata.distributions()}
    assert len(names) > 50  # the environment's packages, not an empty path
    for name in sorted(names):
        provenance.package_version.cache_clear()
        assert provenance.package_version(name) == metadata.version(name), name
    provenance.package_version.cache_clear()
    assert provenance.package_version("no-such-package-here") is None
    assert provenance.package_version("ONNX_Runtime".replace("_", "")) == metadata.version("onnxruntime")


def test_the_os_platform_is_platforms_own_string_without_its_subprocess(monkeypatch):
    import platform
    import subprocess

    expected = platform.platform()

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("os_platform ran a command")
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "check_output", refuse)
    assert provenance.os_platform() == expected and provenance.host_facts()["platform"] == expected
