"""Provenance: the facts that make a number reproducible — versions of every
framework and converter, the host CPU, thread settings. Versions are read from
package metadata, so nothing heavy is imported to learn them."""

from __future__ import annotations

import os
import platform
import re
import sys
from functools import lru_cache
from typing import Any

from deploytool import __version__

PACKAGES = ("numpy", "tensorflow", "keras", "tf-keras", "torch", "tensorflowjs", "tf2onnx", "onnx",
            "onnxruntime", "ai-edge-litert", "litert-torch", "playwright", "adbutils")


@lru_cache(maxsize=None)
def package_version(name: str) -> str | None:
    folder = _dist_info_folders().get(_normalized(name))
    if folder is not None:
        version = _metadata_version(folder)
        if version is not None:
            return version
    from importlib import metadata  # an egg, a zip on sys.path, a finder: it knows them all (a few ms a name)

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@lru_cache(maxsize=1)
def _dist_info_folders() -> dict[str, str]:
    """Installed distributions' .dist-info folders by normalized name, the first on sys.path winning (as for
    importlib.metadata): one listing of each sys.path entry, where importlib.metadata scans them once a name."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info"):
                found.setdefault(_normalized(n[: -len(".dist-info")].partition("-")[0]), os.path.join(entry or ".", n))
    return found


def _metadata_version(folder: str) -> str | None:
    """The Version field of a .dist-info's METADATA (its header: the first blank line ends it)."""
    try:
        with open(os.path.join(folder, "METADATA"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():
                    break
    except OSError:
        pass
    return None


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


ENV_HOST_NAME = "DEPLOYTOOL_HOST_NAME"


def host_name() -> str:
    """The name this host gives its rows: $DEPLOYTOOL_HOST_NAME (a lab whose containers share a
    hostname names them apart), else the network node name."""
    return os.environ.get(ENV_HOST_NAME) or platform.node() or "unknown-host"


def _machine_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            return open(path).read().strip()
        except OSError:
            continue
    return ""


def host_identity() -> str:
    """Where a row ran, as part of its identity: host name, machine id, CPU and OS. Two hosts writing
    the same request to one shared store never share a row."""
    import hashlib

    facts = [host_name(), _machine_id(), cpu_model(), platform.machine(), platform.system()]
    return f"{host_name()[:40]}:{hashlib.sha256('|'.join(facts).encode()).hexdigest()[:12]}"


def os_platform() -> str:
    """`platform.platform()` on Linux without its `uname -p` subprocess (10 ms: a tenth of a small migrate's
    start-up, bench/bench_user_onnx.py): "Linux-6.1.0-x86_64-with-glibc2.36"."""
    if sys.platform != "linux":
        return platform.platform()
    u = os.uname()
    lib, version = platform.libc_ver()
    return f"{u.sysname}-{u.release}-{u.machine}" + (f"-with-{lib}{version}" if lib else "")


def host_facts() -> dict[str, Any]:
    return {
        "deploytool": __version__,
        "host": host_name(),
        "host_id": host_identity(),
        "python": sys.version.split()[0],
        "platform": os_platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                                                   "TF_NUM_INTEROP_THREADS", "MKL_NUM_THREADS") if k in os.environ},
        "versions": {p: v for p in PACKAGES if (v := package_version(p))},
    }
