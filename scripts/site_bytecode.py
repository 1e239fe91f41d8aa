"""Compile the venv's site-packages to bytecode (`make python` runs this with the venv's Python), or link in the
bytecode an earlier setup compiled from the very same files.

PYTHONDONTWRITEBYTECODE is set on this kind of machine, so what an import compiles is never written: without .pyc
files every process would compile TensorFlow's and PyTorch's sources again. compileall takes ~33 s of a 50 s setup on 2 cores
(17,700 files). The files uv installs are hard links into its cache, so a fresh venv (a clean clone's) holds the
same files with the same modification times as the last one: the .pyc files compileall wrote for them are valid
there too (a timestamp .pyc names its source's mtime and size, and Python checks both at every import). They are
kept in ~/.cache/deploytool/site-bytecode/<key> and hard-linked into a fresh venv; the key is the Python version,
the excluded pattern and the path, mtime and size of every source file uv linked in, so any other install compiles
again (pip's fallback links nothing: everything is compiled, as before).
Usage: site_bytecode.py EXCLUDE_REGEX
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

KEEP = 2  # entries kept (the newest); an older one is another install's


def _sources(purelib: Path, exclude: re.Pattern[str]) -> tuple[list[tuple[str, os.stat_result]], list[str]]:
    """The source files compileall compiles: those installed from uv's cache (hard links: the same in every venv),
    and the others (this venv's own: pip from ensurepip, the editable finder naming this clone)."""
    shared, own = [], []
    for dirpath, dirnames, filenames in os.walk(purelib):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if not name.endswith(".py") or exclude.search(path):
                continue
            st = os.stat(path)
            if st.st_nlink > 1 and not name.startswith("__editable__"):
                shared.append((os.path.relpath(path, purelib), st))
            else:
                own.append(path)
    return shared, own


def _key(shared: list[tuple[str, os.stat_result]], exclude: str) -> str:
    h = hashlib.sha256(f"{sys.version}\0{exclude}\0".encode())
    for rel, st in shared:
        h.update(f"{rel}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    return h.hexdigest()[:24]


def _pyc(rel: str) -> str:
    head, name = os.path.split(rel)
    return os.path.join(head, "__pycache__", f"{name[:-3]}.{sys.implementation.cache_tag}.pyc")


def _link(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except FileExistsError:
        pass
    except OSError:  # another file system
        shutil.copy2(src, dest)


def _compile(paths: list[str], exclude: str) -> None:
    # a file no Python 3.11 can compile (a few examples, py3.12-only tests in packages) is skipped as pip skips it:
    # compileall's exit status is not ours to check
    if paths:
        subprocess.run([sys.executable, "-m", "compileall", "-qq", "-j", "0", "-x", exclude, *paths], check=False)


def main(exclude: str) -> int:
    purelib = Path(sysconfig.get_path("purelib"))
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deploytool" / "site-bytecode"
    shared, own = _sources(purelib, re.compile(exclude))
    kept = cache / _key(shared, exclude)
    if (kept / "done").exists():
        for rel, _ in shared:
            if (kept / _pyc(rel)).exists():
                _link(kept / _pyc(rel), purelib / _pyc(rel))
        os.utime(kept)
        _compile(own, exclude)
        print(f"setup: the bytecode of {len(shared)} files of the same packages linked in from {kept}; "
              f"{len(own)} of this venv's own compiled")
        return 0
    _compile([str(purelib)], exclude)
    partial = cache / f"{kept.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        for rel, _ in shared:
            if (purelib / _pyc(rel)).exists():
                _link(purelib / _pyc(rel), partial / _pyc(rel))
        (partial / "done").touch()
        os.replace(partial, kept)
    except OSError:  # another setup kept the same entry first, or the cache cannot be written: compiled anyway
        shutil.rmtree(partial, ignore_errors=True)
    for old in sorted((p for p in cache.iterdir() if p.is_dir() and ".partial-" not in p.name),
                      key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
