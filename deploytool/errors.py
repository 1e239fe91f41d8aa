"""Typed errors a user can hit. Each message names the problem and the fix;
the CLI turns any of them into one line on stderr and exit code 2.

Errors that are *findings* (a conversion that fails, a runtime that crashes on
one combination) are not raised to the user: the pipeline records them as a
result with a status. `StageFailed` carries them inside the pipeline.
"""

from __future__ import annotations


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


class HarnessMissing(DeploytoolError):
    """A device-side or browser-side harness piece is not installed."""


class StageFailed(Exception):
    """One combination failed in one stage; recorded as that combination's result.

    `status` is the result status to record (e.g. "conversion_failed",
    "load_failed", "runtime_failed", "timeout", "unsupported").
    """

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason

    def __reduce__(self):
        return (StageFailed, (self.status, self.reason))
