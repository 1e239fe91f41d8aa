"""Typed errors a user can hit. Each message names the problem and the fix;
the CLI turns any of them into one line on stderr and exit code 2.

Errors that are *findings* (a conversion that fails, a runtime that crashes on
one combination) are not raised to the user: the pipeline records them as a
result with a status. `StageFailed` carries them inside the pipeline.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from deploytool.value import value


class DeploytoolError(Exception):
    """Base for errors caused by the user's input or machine; exit code 2."""

    exit_code = 2


class SpecError(DeploytoolError):
    """A model manifest is malformed or names something unknown."""


class UnknownModel(DeploytoolError):
    pass


class DataError(DeploytoolError):
    """Missing data folder, malformed .npz, checksum mismatch, ..."""


class ShapeError(DataError):
    pass


class BadModelFile(DeploytoolError):
    """A model file that cannot be read (corrupt, wrong kind, missing)."""


class UnknownOption(DeploytoolError):
    """An unknown format, quantization, target, backend, delegate, ..."""


class NotTrained(DeploytoolError):
    """A stage needs a trained model that is not in the workspace."""


class TrainingFailed(DeploytoolError):
    """The training process ended without a model (killed, out of memory)."""


class StoreError(DeploytoolError):
    pass


class WorkspaceError(DeploytoolError):
    """A workspace that cannot be written, or a name that would leave it."""


class DeviceNotFound(DeploytoolError):
    pass


class DeviceError(DeploytoolError):
    """A device that is attached but cannot be used (unauthorized, offline, wrong ABI)."""


# The words of a row a phone had no room for (deploytool.runtimes.android), which triage reads as the device's state:
# not the model's nor a library's fault.
PHONE_STORAGE_FULL = "too little free storage"
# How a worker killed by the kernel's out-of-memory killer is described (deploytool.proc.worker), for triage.
OUT_OF_MEMORY = "the kernel's out-of-memory killer"


class HarnessMissing(DeploytoolError):
    """A device-side or browser-side harness piece is not installed."""


class StageFailed(Exception):
    """One combination failed in one stage; recorded as that combination's result.

    `status` is the result status to record (e.g. "conversion_failed",
    "load_failed", "runtime_failed", "timeout", "unsupported"). `raised`: the
    exception it stands for, where one was raised (its class, words and frames:
    what triage reads to tell deploytool's own bugs from upstream's).
    """

    def __init__(self, status: str, reason: str, raised: "Raised | None" = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.raised = raised

    def __reduce__(self) -> Any:
        # crossing a process boundary drops the cause: its evidence travels as a value instead
        raised = self.raised
        if raised is None and self.__cause__ is not None and type(self.__cause__).__name__ != "_RemoteTraceback":
            raised = Raised.of(self.__cause__)
        return (StageFailed, (self.status, self.reason, raised))


class ToolFailed(Exception):
    """A tool's failure as deploytool read it out of the tool (what it printed before it exited, a module it
    lacks): raised by deploytool's code, but the tool's fault to triage — its `__cause__` (the tool's own
    exception, e.g. the SystemExit it raised) says where the tool gave up."""


class WrongConversion(ToolFailed):
    """A converter finished, but the file it wrote is not the model it was given (tf2onnx leaving constants the
    model captured as inputs the source does not have): raised by deploytool on reading the tool's output, the
    tool's fault to triage (an upstream candidate, never deploytool's own bug)."""


class NoConversion(ToolFailed):
    """A converter or runtime has no conversion or kernel for an op, or needs an option the user did not ask for
    (TensorFlow ops through Flex): a coverage gap, never a bug report. deploytool raises it where it reads such an
    answer out of a tool (its `__cause__` is the tool's own exception); triage classes it `unsupported`."""

    def __init__(self, message: str, ops: tuple[str, ...] = (), remedy: str = ""):
        super().__init__(message)
        self.ops, self.remedy = tuple(ops), remedy

    def __reduce__(self) -> Any:
        return (NoConversion, (str(self), self.ops, self.remedy))


class OutputMismatch(ValueError):
    """A converted model's output cannot be laid beside the PC baseline's (another shape, a missing output).
    Raised by the judge; the row fails with it, and triage tells a converter's changed output from deploytool
    handling samples or layouts wrongly (as many values per sample on both sides)."""


# -- what an exception said and where it was raised, as a value --------------------------------------------
@value
class Frame:
    """One frame of a traceback: `package` is "deploytool", a distribution's import name (the top folder under
    site-packages: "onnx2tf", "tensorflow"), "python" for the standard library, or "" for anything else."""

    file: str
    line: int
    function: str
    package: str

    @property
    def generated(self) -> bool:
        """Code a framework generated at run time (autograph's files, torch.fx's `eval_with_key`)."""
        return self.file.startswith("<") or "__autograph_generated" in self.file or "eval_with_key" in self.file

    @property
    def short(self) -> str:
        """The file from its package's folder on (`onnx2tf/ops/Reshape.py:120`), else as it is."""
        m = _SITE.search(self.file)
        name = self.file[m.start() + len(m.group(0)) - len(m.group("top")):] if m else self.file
        if self.package == "deploytool" and "/deploytool/" in name:
            name = "deploytool/" + name.rsplit("/deploytool/", 1)[1]
        return f"{name}:{self.line}"

    def describe(self) -> str:
        return f"{self.short} in {self.function}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "package": self.package}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Frame":
        return cls(str(d.get("file") or ""), int(d.get("line") or 0), str(d.get("function") or ""),
                   str(d.get("package") or ""))


_OWN = Path(__file__).resolve().parent  # deploytool/
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<top>[^/\\]+)")
_REMOTE_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$', re.M)


@lru_cache(maxsize=1)
def _stdlib() -> tuple[str, ...]:
    """The standard library's folders (read when a traceback is classified, not at every command's start)."""
    import sysconfig

    return tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])})


def package_of(file: str) -> str:
    """Whose code a source file is: "deploytool", a site-packages top-level name, "python", or ""."""
    try:
        path = Path(file).resolve()
    except (OSError, RuntimeError):
        path = Path(file)
    if path == _OWN or _OWN in path.parents:
        return "deploytool"
    m = _SITE.search(str(path))
    if m:
        top = m.group("top")
        return top.removesuffix(".py").split(".")[0] if not top.endswith(".so") else top.split(".")[0]
    if str(path).startswith(_stdlib()) or file.startswith("<frozen"):
        return "python"
    return ""


def _frames_of(tb: Any) -> list[Frame]:
    import traceback

    return [Frame(f.filename, f.lineno or 0, f.name, package_of(f.filename)) for f in traceback.extract_tb(tb)]


def _remote_frames(text: str) -> list[Frame]:
    """The frames of a traceback printed in another process (concurrent.futures' `_RemoteTraceback`)."""
    return [Frame(m["file"], int(m["line"]), m["fn"].strip(), package_of(m["file"])) for m in _REMOTE_FRAME.finditer(text)]


class ForeignError(Exception):
    """A library's exception raised in a worker, sent to the parent by its class's name and its message (the worker's
    traceback travels with it as ever): unpickling the class itself would import its library (TensorFlow: 4-5 s of
    CPU, and its native log on the user's terminal) in a process that has no other use for it."""

    def __init__(self, exception: str, message: str):
        super().__init__(message)
        self.exception = exception  # "tensorflow.python.framework.errors_impl.InvalidArgumentError"

    def __reduce__(self) -> tuple[Any, ...]:
        return ForeignError, (self.exception, str(self))

    @classmethod
    def of(cls, e: BaseException) -> "ForeignError":
        return cls(f"{type(e).__module__}.{type(e).__qualname__}", str(e))


def exception_name(e: BaseException) -> str:
    """The class name `e` is worded by: a ForeignError's is the library's class it stands for."""
    return e.exception.rsplit(".", 1)[-1] if isinstance(e, ForeignError) else type(e).__name__


def _foreign(e: BaseException) -> bool:
    top = type(e).__module__.split(".")[0]
    return top not in ("builtins", "deploytool") and top not in sys.stdlib_module_names


def sent_home(e: BaseException) -> BaseException:
    """`e` as a worker sends it to its parent: every library exception in it and in its chain (the cause and context
    of each) replaced by a ForeignError with its traceback, so unpickling it imports no library. A deploytool
    exception keeps its class; the library's exception it was raised from would otherwise travel too (tblib, which
    a dependency installs, pickles `__cause__` and `__context__`: a conversion failing in TensorFlow imported
    TensorFlow in the CLI)."""
    seen: dict[int, BaseException] = {}

    def fix(x: BaseException | None) -> BaseException | None:
        if x is None:
            return None
        if id(x) in seen:
            return seen[id(x)]
        out = ForeignError.of(x).with_traceback(x.__traceback__) if _foreign(x) else x
        seen[id(x)] = out
        suppress = x.__suppress_context__
        out.__cause__, out.__context__ = fix(x.__cause__), fix(x.__context__)
        out.__suppress_context__ = suppress
        return out

    return fix(e) or e


@value
class Raised:
    """What an exception said and where it was raised, outermost frame first; the frames of the process that
    raised it (a worker's, when it crossed a process boundary). A value that pickles and stores as JSON."""

    exception: str  # its class, with its module where that is not builtins: "onnx.onnx_cpp2py_export.checker.ValidationError"
    message: str
    frames: tuple[Frame, ...] = ()
    ops: tuple[str, ...] = ()  # a NoConversion's ops
    remedy: str = ""  # and what would make it work

    @classmethod
    def of(cls, e: BaseException) -> "Raised":
        """`e` as a value: a StageFailed that stands for a tool's exception is read through to it (its `raised`,
        else its cause); a NoConversion keeps its class and gets its cause's frames (where the tool said so); a
        worker's exception keeps the worker's frames."""
        if isinstance(e, StageFailed):
            if e.raised is not None:
                return e.raised
            if e.__cause__ is not None and type(e.__cause__).__name__ != "_RemoteTraceback":
                return cls.of(e.__cause__)
        frames = _frames_of(e.__traceback__)
        remote = e.__cause__ if type(e.__cause__).__name__ == "_RemoteTraceback" else None
        if remote is not None:  # the frames in the worker that raised it come after the parent's wait for it
            frames = [f for f in frames if f.package != "python"] + _remote_frames(str(remote))
        cause = e.__cause__
        if isinstance(e, ToolFailed) and cause is not None and remote is None:
            frames = _frames_of(cause.__traceback__) or frames  # where the tool gave up, not where we read it
        if isinstance(e, NoConversion):
            return cls("NoConversion", str(e)[:4000], tuple(frames[-40:]), e.ops, e.remedy)
        module = type(e).__module__
        name = type(e).__qualname__ if module in ("builtins", "__main__") else f"{module}.{type(e).__qualname__}"
        return cls(e.exception if isinstance(e, ForeignError) else name, str(e)[:4000], tuple(frames[-40:]))

    @property
    def name(self) -> str:
        """The class's own name: `ValidationError`."""
        return self.exception.rsplit(".", 1)[-1]

    @property
    def innermost(self) -> Frame | None:
        """The frame that raised it, past the standard library's own (a `json.loads` raising is its caller's) and
        code a framework generated at run time (TensorFlow's autograph, torch.fx: the framework's, not ours)."""
        own = [f for f in self.frames if f.package != "python" and not f.generated]
        return own[-1] if own else (self.frames[-1] if self.frames else None)

    @property
    def in_own_code(self) -> bool:
        """Raised in deploytool's code or a plugin's (a module on no site-packages path): never upstream's."""
        at = self.innermost
        return at is not None and at.package in ("deploytool", "")

    @property
    def first_line(self) -> str:
        return first_line_of(self.message)

    def to_json(self) -> dict[str, Any]:
        return {"exception": self.exception, "message": self.message, "frames": [f.to_json() for f in self.frames],
                "ops": list(self.ops), "remedy": self.remedy}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> "Raised | None":
        if not d:
            return None
        return cls(str(d.get("exception") or ""), str(d.get("message") or ""),
                   tuple(Frame.from_json(f) for f in d.get("frames") or ()), tuple(d.get("ops") or ()),
                   str(d.get("remedy") or ""))


def first_line_of(text: str, limit: int = 300) -> str:
    """The first non-empty line of a message, stripped and cut to `limit` characters."""
    return next((ln.strip() for ln in str(text or "").splitlines() if ln.strip()), "")[:limit]

