"""How a call into a child-process worker (`proc.worker.Worker`) can fail, apart from the module that starts the
workers: its callers catch these at module level without importing multiprocessing where no worker starts (a
run whose rows are all cached, `--help`)."""

from __future__ import annotations


class WorkerLost(Exception):
    """The worker process ended while a call ran in it (a crash in native code, an abort, the OOM killer, a kill).
    `how` says how it ended, `log_tail` the last lines of its log ("" without one)."""

    def __init__(self, how: str, log_tail: str = ""):
        super().__init__(how + (f"; last output: {log_tail}" if log_tail else ""))
        self.how, self.log_tail = how, log_tail


class WorkerTimedOut(Exception):
    """A call took longer than its timeout; the worker was killed (the next call gets a fresh one)."""

    def __init__(self, timeout_s: float, how: str):
        super().__init__(f"the call took longer than {timeout_s:g} s; the worker was stopped ({how})")
        self.timeout_s, self.how = timeout_s, how


__all__ = ["WorkerLost", "WorkerTimedOut"]
