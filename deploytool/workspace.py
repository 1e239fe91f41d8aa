"""The workspace (`--workspace DIR`, default ./runs): where trained models,
converted artifacts, per-sample outputs, the results database and reports
live. It only names places and finds cached entries by key; it never decides
what to compute.

Every path it hands out is checked to stay under the workspace root: names
that become path segments (run ids, model names, keys) are validated with
`check_name`, and `inside()` refuses anything that would resolve outside.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from deploytool.errors import WorkspaceError
from deploytool.value import value

DEFAULT_WORKSPACE = Path("runs")
# A name that becomes one path segment: no separators, no leading dot, bounded so
# that a run id built from it fits the store's columns.
NAME_MAX = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


CACHE_ENV = "DEPLOYTOOL_CACHE"


def cache_home() -> Path:
    """deploytool's per-user cache outside any workspace ($DEPLOYTOOL_CACHE, else $XDG_CACHE_HOME/deploytool, else
    ~/.cache/deploytool): what is worth keeping between runs but never a result (compiled report templates, the
    Chromium build seen per binary). Nothing else of deploytool's is written outside the workspace."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deploytool"


def stable_hash(obj: Any, length: int = 16) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:length]


def check_name(name: str, what: str, limit: int = NAME_MAX) -> str:
    """`name` unchanged when it is safe as one path segment; otherwise WorkspaceError naming `what`."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name or len(name) > limit:
        raise WorkspaceError(f"{what} {name!r} cannot name a folder: use 1-{limit} letters, digits, '.', '_' "
                             "or '-', starting with a letter or digit (no '/', no '..')")
    return name


def safe_segment(text: str, limit: int = 40) -> str:
    """A readable, path-safe version of arbitrary text (a user's file stem): never refused, only cleaned."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")
    s = re.sub(r"\.{2,}", ".", s)[:limit].strip(".-_")
    return s or "model"


@value
class Workspace:
    root: Path

    @classmethod
    def open(cls, root: str | Path | None = None, *, writable: bool = True) -> "Workspace":
        """The workspace at `root`, created when missing; `writable=False` for commands that only read it."""
        r = Path(root or os.environ.get("DEPLOYTOOL_WORKSPACE") or DEFAULT_WORKSPACE).resolve()
        try:
            r.mkdir(parents=True, exist_ok=True)
            if writable:  # for real: root ignores permission bits, a read-only mount or a full disk does not
                with tempfile.NamedTemporaryFile(dir=r, prefix=".deploytool-probe-"):
                    pass
        except OSError as e:
            raise WorkspaceError(f"workspace {r} is not writable ({e.strerror or type(e).__name__}); "
                                 "pass --workspace DIR pointing at a writable folder") from None
        return cls(r)

    def inside(self, path: Path) -> Path:
        """`path` if it resolves under the workspace root, else WorkspaceError."""
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            raise WorkspaceError(f"{path} would be written outside the workspace {self.root}; "
                                 "names that become folders must not contain '/' or '..'")
        return path

    def model_dir(self, name: str, framework: str, key: str) -> Path:
        return self.inside(self.root / "models" / check_name(f"{name}-{framework}-{key}", "model folder", 160))

    def artifact_dir(self, key: str) -> Path:
        return self.inside(self.root / "artifacts" / check_name(key, "artifact key"))

    def report_dir(self, run_id: str) -> Path:
        return self.inside(self.root / "reports" / check_name(run_id, "run id", 128))

    def finding_dir(self, finding_id: str) -> Path:
        return self.inside(self.root / "findings" / check_name(finding_id, "finding id"))

    def outputs_path(self, run_id: str, combo_key: str) -> Path:
        return self.inside(self.root / "outputs" / check_name(run_id, "run id", 128)
                           / f"{check_name(combo_key, 'combination key')}.npy")

    def relative(self, path: Path) -> str:
        """How the store records a workspace file: relative to the root, so the row means the same on any host."""
        return Path(path).resolve().relative_to(self.root).as_posix()

    def absolute(self, stored: str) -> Path:
        """A path as the store recorded it (workspace-relative, or absolute from older runs)."""
        p = Path(stored)
        return p if p.is_absolute() else self.inside(self.root / p)

    @property
    def default_db_url(self) -> str:
        return f"sqlite:///{self.root / 'results.db'}"

    def blob_dir(self) -> Path:
        """Where the large files of bug bundles, finding folders and kept conversion inputs live once per content
        (`share_large_files`)."""
        return self.inside(self.root / "blobs")


# A bundle's or finding's file this large is kept once per content (share_large_files); smaller ones are copies.
SHARED_FILE_BYTES = 1 * 2**20


def share_large_files(folder: Path, blobs: Path, min_bytes: int = SHARED_FILE_BYTES) -> int:
    """Make every file of `min_bytes` or more under `folder` a hard link to one read-only file per content,
    `blobs/<sha256>`; returns the bytes this saved. A real-size model failing on several routes put its 419 MB
    file into every row's bug bundle, every finding's folder and every failed step's kept input: 7 GB for one
    BERT-base run. Blobs no folder links any more are removed first. Where links cannot be made (another file
    system) the files stay copies. The shared file is read-only: a folder is rewritten by removing it first
    (write_bundle, write_finding), never by writing into it, and `deploytool findings --export` copies the bytes."""
    blobs = Path(blobs)
    if blobs.is_dir():
        for old in blobs.iterdir():
            if old.is_file() and old.stat().st_nlink == 1:
                old.unlink(missing_ok=True)
    saved = 0
    for path in sorted(Path(folder).rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        st = path.stat()
        if st.st_size < min_bytes:
            continue
        blob = blobs / _file_digest(path)
        try:
            if blob.is_file() and blob.stat().st_size == st.st_size:
                if blob.stat().st_ino != st.st_ino:
                    tmp = path.with_name(f".{path.name}.linking")
                    tmp.unlink(missing_ok=True)
                    os.link(blob, tmp)
                    os.replace(tmp, path)
                    saved += st.st_size
            else:
                blobs.mkdir(parents=True, exist_ok=True)
                os.link(path, blob)
            os.chmod(blob, 0o444)
        except OSError:
            continue
    return saved


def _file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@contextmanager
def made_by_one(folder: Path) -> Iterator[None]:
    """Held while a cached `folder` is made: another process (a second run on this workspace) waits, then finds it
    made, instead of emptying it under the first one's feet. An flock on a file beside it, released when the
    holder ends, even killed."""
    lock = folder.with_name(f".{folder.name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def fresh_dir(path: Path) -> Path:
    """An empty directory at `path` (a half-written earlier attempt is removed)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path
