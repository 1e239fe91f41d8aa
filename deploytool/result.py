"""`Result`: one row of a run — (model, dataset, framework, format, quantize,
target, device/backend) -> status, comparison, provenance. A value object; the
store persists it and the report reads it. A failed stage is a Result too."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from deploytool.workspace import stable_hash

# status words: "measured" means a Comparison exists; every other status carries a reason.
# Final: measuring again would give the same answer; every other status (a phone unplugged, a run that
# timed out, a runtime error) is tried again by a re-run of the same request. Failing: the exit code is 1.
FINAL_STATUSES = ("measured", "conversion_failed", "unsupported", "not_applicable", "delegate_refused", "wrong_abi")
FAILING_STATUSES = ("conversion_failed", "runtime_failed", "timeout", "device_error", "device_lost", "wrong_abi",
                    "error")


@dataclass(frozen=True)
class Combo:
    framework: str
    format: str
    quantize: str
    target: str
    device: str = ""  # android serial, or "" elsewhere
    backend: str = ""  # web backend (wasm/cpu/webgl), android delegate, or ""

    @property
    def label(self) -> str:
        where = self.target + (f":{self.backend}" if self.backend else "") + (f"@{self.device}" if self.device else "")
        return f"{self.framework}->{self.format}/{self.quantize} on {where}"

    def key(self, model: str, dataset_sha256: str) -> str:
        return stable_hash({"model": model, "data": dataset_sha256, **asdict(self)})


@dataclass
class Result:
    run_id: str
    combo_key: str
    model: str
    dataset: str
    combo: Combo
    status: str
    reason: str = ""
    verdict: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)  # flat numbers: accuracy, p50_ms, size_ratio, ...
    details: dict[str, Any] = field(default_factory=dict)  # comparison, artifact, environment, notes, timings
    outputs_path: str = ""
    created_at: str = ""

    @property
    def failing(self) -> bool:
        return self.status in FAILING_STATUSES or self.verdict == "fail"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Result":
        d = dict(d)
        d["combo"] = Combo(**d["combo"])
        return cls(**d)
