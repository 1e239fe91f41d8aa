"""The typed values a store hands back besides `Result`s: a run's record (`RunRecord`) and a finding
(`Finding`, one distinct bug across runs; deploytool.bugs.findings makes and reads them). Frozen; their JSON
form (`to_json`) is the row as stored, key for key, which is what finding.json and `--output json` print."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping

from deploytool.value import value


@value
class RunRecord:
    """A run as the `runs` table keeps it: who started it where and when, its status and the request it ran."""

    run_id: str
    model: str = ""
    status: str = ""
    host: str = ""
    created_at: str = ""
    updated_at: str = ""
    request: dict[str, Any] = field(default_factory=dict)  # as recorded at its first start (JSON)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRecord":
        return cls(run_id=row["run_id"], model=row.get("model") or "", status=row.get("status") or "",
                   host=row.get("host") or "", created_at=row.get("created_at") or "",
                   updated_at=row.get("updated_at") or "", request=dict(row.get("request") or {}))

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "model": self.model, "status": self.status, "host": self.host,
                "created_at": self.created_at, "updated_at": self.updated_at, "request": self.request}


@value
class Finding:
    """One distinct bug: its signature, who owns the faulty part, where and when it was seen, what was installed."""

    id: str
    signature: dict[str, Any]  # deploytool.bugs.findings.Signature as JSON (the store keeps it, never reads it)
    owner: str
    title: str
    first_seen: str
    last_seen: str
    occurrences: int
    runs: tuple[str, ...] = ()  # run ids, in the order first seen
    versions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # package -> versions it was seen with
    last_versions: dict[str, str] = field(default_factory=dict)  # package -> version at the last sighting
    examples: tuple[str, ...] = ()  # row labels it was seen in
    bundle: str = ""  # the latest bug bundle of it
    not_seen_since: str | None = None  # e.g. "tfjs-tflite 0.0.1-alpha.11" once a run no longer shows it
    triage: dict[str, Any] = field(default_factory=dict)  # result.Triage as JSON, at the last sighting
    # an upstream candidate's bare reproducer, run in a process that cannot import deploytool
    # (deploytool.bugs.confirm): {"state": confirmed | not_reproduced | not_run, "command", "output", "at", ...}
    confirmation: dict[str, Any] = field(default_factory=dict)

    @property
    def klass(self) -> str:
        """Its triage class ("" for a finding stored before triage, until it is seen again)."""
        return str(self.triage.get("class") or "")

    @property
    def state(self) -> str:
        """Where it stands for a maintainer: "confirmed", "candidate", "not reproduced", "unconfirmed" (outside
        its pins), "coverage gap", or "untriaged"."""
        k = self.klass
        if k == "upstream":
            state = self.confirmation.get("state")
            return {"confirmed": "confirmed", "not_reproduced": "not reproduced"}.get(str(state), "candidate")
        return {"unsupported": "coverage gap", "environment": "unconfirmed", "internal_error": "deploytool bug"}.get(
            k, "untriaged")

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Finding":
        """A finding from its stored row (JSON columns parsed) or its to_json form; empty columns read as empty."""
        return cls(id=d["id"], signature=dict(d.get("signature") or {}), owner=d.get("owner") or "",
                   title=d.get("title") or "", first_seen=d.get("first_seen") or "",
                   last_seen=d.get("last_seen") or "", occurrences=int(d.get("occurrences") or 0),
                   runs=tuple(d.get("runs") or ()),
                   versions={p: tuple(v) for p, v in (d.get("versions") or {}).items()},
                   last_versions=dict(d.get("last_versions") or {}), examples=tuple(d.get("examples") or ()),
                   bundle=d.get("bundle") or "", not_seen_since=d.get("not_seen_since"),
                   triage=dict(d.get("triage") or {}), confirmation=dict(d.get("confirmation") or {}))

    def to_json(self) -> dict[str, Any]:
        """The finding as its row holds it, in the table's column order."""
        return {"id": self.id, "signature": self.signature, "owner": self.owner, "title": self.title,
                "first_seen": self.first_seen, "last_seen": self.last_seen, "occurrences": self.occurrences,
                "runs": list(self.runs), "versions": {p: list(v) for p, v in self.versions.items()},
                "last_versions": dict(self.last_versions), "examples": list(self.examples), "bundle": self.bundle,
                "not_seen_since": self.not_seen_since, "triage": dict(self.triage),
                "confirmation": dict(self.confirmation)}


def by_prefix(findings: list[Finding], prefix: str) -> Finding | None:
    """The finding whose id is `prefix` or starts with it, when exactly one does."""
    matches = [f for f in findings if f.id.startswith(prefix)]
    return matches[0] if len(matches) == 1 else None
