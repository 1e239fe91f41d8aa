"""What the integration tier builds once and keeps between sessions (and clean clones) under
~/.cache/deploytool/tests: the trained LeNet-5 and LeNet-1 twins, and converted artifacts of the models it migrates.
Every folder is keyed by the code that makes what it holds, so nothing stale is used; each entry inside is written
whole, then renamed."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

# Where kept things live, read once when the tests start: a fixture that moves $HOME (the phone's, for its adb keys)
# must not move the cache with it.
CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deploytool" / "tests"


def kept_models(model: str = "lenet5") -> Path:
    """The trained twins of a zoo `model` (LeNet-5; LeNet-1 for its training test) kept between sessions (and
    clones), keyed by the code that makes them: the model zoo, the input kinds, the trainer, the model's manifest.
    Inside, the trainer's own cache key adds the data's sha256 (so an edit to a data loader that changes the bytes
    trains again; one that does not, does not), the epochs, the seed and the framework versions. Training itself
    runs for real in every session all the same: `study frameworks` trains LeNet-1's twins over two seeds
    (test_study_frameworks.py), its key holding the seed and sample counts, and nothing of it is kept."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted([root / "models" / f"{model}.toml", root / "deploytool" / "spec.py",
                     root / "deploytool" / "proc" / "threads.py", *(root / "deploytool" / "train").glob("*.py"),
                     *(root / "deploytool" / "zoo").glob("*.py"), *(root / "deploytool" / "kinds").glob("*.py")]):
        h.update(f.name.encode() + f.read_bytes())
    return CACHE_HOME / f"{model}-trained-{h.hexdigest()[:16]}"


def kept_twin(model: str, framework: str, scratch: Path) -> Path:
    """The `models` folder holding zoo `model`'s trained `framework` twin: trained once in a workspace under
    `scratch`, under its own file lock (xdist workers and other sessions wait for it), or the kept copy of an
    earlier session (kept_models)."""
    from deploytool.data import load_dataset
    from deploytool.spec import load_spec
    from deploytool.train import train
    from deploytool.workspace import Workspace

    def trained(folder: Path) -> None:
        work = Workspace.open(scratch / f"train-ws-{model}-{framework}")
        spec = load_spec(model)
        train(spec, framework, load_dataset(spec), work, progress=False)
        shutil.copytree(work.root / "models", folder / "models")

    kept = kept_models(model)
    return fill_once(kept.with_name(f"{kept.name}-{framework}"), trained) / "models"


def _converter_code_hash(h) -> None:
    """Add to `h` the code that converts and names artifacts: the converters, the artifact and model-file modules,
    the input kinds a file's signature infers, and of the runner what names and makes an artifact (not how rows are
    judged: an edit there converts nothing)."""
    import inspect

    from deploytool.run import runner

    root = Path(__file__).resolve().parents[1] / "deploytool"
    for f in sorted([*(root / "convert").glob("*.py"), root / "artifact.py", *(root / "modelfiles").glob("*.py"),
                     *(root / "kinds").glob("*.py")]):
        h.update(f.name.encode() + f.read_bytes())
    h.update(f"{runner.ARTIFACT_SCHEME}{inspect.getsource(runner.artifact_dir)}"
             f"{inspect.getsource(runner.convert_cached)}".encode())


def kept_conversions(sources: str) -> Path:
    """Converted artifacts kept between sessions for the models named by `sources` (a key of the files they are
    made from), keyed also by the converters' code (_converter_code_hash). Inside, each entry's own key
    (deploytool.run.runner.artifact_dir) adds the source's sha256, the format, the quantization, the calibration
    set and the converter packages' versions. Conversions themselves are tested on tiny models in test_convert*.py
    and the contract tier; an edit to a converter converts again. A conversion that fails is not kept: it fails
    again, with its finding and bundle, in every session."""
    import hashlib

    h = hashlib.sha256(sources.encode())
    _converter_code_hash(h)
    return CACHE_HOME / f"{sources.split('-')[0]}-converted-{h.hexdigest()[:16]}"


def kept_lenet5_conversions() -> Path:
    """LeNet-5's converted artifacts kept between sessions (kept_conversions of the trained models they come
    from). The host and web matrix fixtures fill it."""
    return kept_conversions(kept_models().name)


def seed_conversions(ws, kept: Path) -> None:
    """Copy into `ws` the conversions an earlier session kept in `kept` (each artifact.json finds its file in the
    copy; entries no row asks for are never read)."""
    if kept.is_dir():
        for entry in kept.glob("*/artifact.json"):
            shutil.copytree(entry.parent, ws.root / "artifacts" / entry.parent.name, dirs_exist_ok=True)


def keep_conversions_of(ws, kept: Path | None = None) -> None:
    """Add the conversions of `ws` the kept folder (LeNet-5's by default) does not hold yet (each entry written
    whole, then renamed)."""
    from filelock import FileLock

    kept = kept or kept_lenet5_conversions()
    kept.mkdir(parents=True, exist_ok=True)
    with FileLock(str(kept) + ".lock"):
        for entry in sorted((ws.root / "artifacts").glob("*/artifact.json")):
            dest = kept / entry.parent.name
            if dest.exists():
                continue
            partial = kept / f".{entry.parent.name}.partial-{os.getpid()}"
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(entry.parent, partial)
            os.replace(partial, dest)


def kept_build(name: str, build: Callable[[Path], None], *code: Path) -> Path:
    """A folder `build(folder)` fills with model files and test sets, built once and kept between sessions, keyed
    by `build`'s source, the files of `code` (the builders it calls) and the versions of the packages that could
    change the bytes. Kept bytes are what let the models' conversions be kept too (kept_conversions(name): their
    entries are keyed by the source's sha256). Use it as a read-only source: copy what a run may write beside."""
    import hashlib
    import inspect

    from tests.contract.model_cache import _code_sha256, _versions

    h = hashlib.sha256(_code_sha256(*code).encode())
    h.update(f"{inspect.getsource(build)}{sorted(_versions().items())}".encode())
    return fill_once(CACHE_HOME / f"{name}-{h.hexdigest()[:16]}", build)


def copy_kept(name: str, build: Callable[[Path], None], out: Path, code: Path) -> Any:
    """kept_build(name, build, code) copied into `out` (the caller's to write in), and the arrays its build saved
    beside the models (`arrays.npz`), loaded."""
    import numpy as np

    shutil.copytree(kept_build(name, build, code), out, dirs_exist_ok=True)
    return np.load(out / "arrays.npz")


def fill_once(kept: Path, fill: Callable[[Path], None]) -> Path:
    """`kept`, filled by `fill(folder)` unless an earlier session (or another xdist worker: it waits on the lock)
    filled it: written in a folder of its own, marked done, then renamed into place."""
    from filelock import FileLock

    kept.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(kept) + ".lock"):
        if not (kept / "done").exists():
            partial = kept.with_name(f"{kept.name}.partial-{os.getpid()}")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            fill(partial)
            (partial / "done").touch()
            shutil.rmtree(kept, ignore_errors=True)
            os.replace(partial, kept)
    return kept


@contextmanager
def conversions_kept(ws_root: Path, name: str) -> Iterator[None]:
    """Around a run on the workspace at `ws_root`: the conversions kept under `name` (kept_conversions) copied in
    before it, and the ones it made kept after it (a run that fails keeps nothing)."""
    from deploytool.workspace import Workspace

    kept = kept_conversions(name)
    seed_conversions(Workspace.open(ws_root), kept)
    yield
    keep_conversions_of(Workspace.open(ws_root), kept)
