"""Converters checked against each other: the rows of one source converted to
the same artifact format with the same quantization and run in the same place
by different converters (TFLite from litert-torch and from onnx2tf, ...),
side by side, and which of them departs from the source model's own outputs.
It reads rows — `ReportRow`s as report.summary_rows makes them, or the
`PairRow`s `row_of` makes of Results (findings) — and judges nothing anew:
agreement and accuracy are the rows' own numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from deploytool.convert import FORMATS

# agreement points between two passing converters beyond which the lower one is said to depart
DEPART_POINTS = 1.0


class PairSource(Protocol):
    """What this module reads of a row: a report.ReportRow, or a PairRow."""

    @property
    def label(self) -> str: ...
    @property
    def framework(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def quantize(self) -> str: ...
    @property
    def where(self) -> str: ...
    @property
    def artifact(self) -> dict[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def failing(self) -> bool: ...
    @property
    def verdict(self) -> str | None: ...
    @property
    def agreement(self) -> Any: ...
    @property
    def accuracy(self) -> Any: ...
    @property
    def max_abs_error(self) -> Any: ...


@dataclass(frozen=True)
class PairRow:
    """The few fields of a Result this module reads (row_of), for callers that hold Results (findings)."""

    label: str
    framework: str
    format: str
    quantize: str
    where: str
    artifact: dict[str, Any]  # Artifact.to_json, {} without one
    status: str
    failing: bool
    verdict: str | None
    agreement: Any  # the Result's own numbers, as its metrics hold them
    accuracy: Any
    max_abs_error: Any


@dataclass(frozen=True)
class PairEntry:
    """One converter of a pair."""

    converter: str
    format: str
    label: str
    status: str
    verdict: str | None
    failing: bool
    agreement: Any
    accuracy: Any
    max_abs_error: Any


@dataclass
class ConverterPair:
    framework: str
    artifact_format: str
    quantize: str
    where: str
    entries: list[PairEntry] = field(default_factory=list)  # one per converter, in row order
    departs: list[str] = field(default_factory=list)  # converters whose outputs depart from the source's

    @property
    def sentence(self) -> str:
        """What a finding says of the pair."""
        if not self.departs:
            return ""
        others = [e for e in self.entries if e.converter not in self.departs]
        right = ", ".join(f"{e.converter} ({_pct(e.agreement)} agreement)" for e in others)
        return (f"{' and '.join(self.departs)} departs from the source's outputs"
                + (f"; {right} on the same source does not" if right else ""))


def converter_name(row: PairSource) -> str:
    conv = row.artifact.get("converter")
    return re.sub(r"\s+v?\d+(?:\.\d+)+\S*", "", conv) if conv else f"({row.format} route)"


def row_of(result: Any) -> PairRow:
    """The few fields of a Result this module reads, for callers that hold Results (findings)."""
    c, m = result.combo, result.metrics
    return PairRow(label=c.label, framework=c.framework, format=c.format, quantize=c.quantize, where=c.where,
                   artifact=result.artifact.to_json() if result.artifact is not None else {},
                   status=str(result.status), failing=result.failing,
                   verdict=str(result.verdict) if result.verdict is not None else None,
                   agreement=m.get("agreement"), accuracy=m.get("accuracy"), max_abs_error=m.get("max_abs_error"))


def converter_pairs(rows: Sequence[PairSource]) -> list[ConverterPair]:
    groups: dict[tuple[str, str, str, str], list[PairSource]] = {}
    for r in rows:
        fmt = r.artifact.get("format") or (FORMATS[r.format].artifact if r.format in FORMATS else r.format)
        groups.setdefault((r.framework, fmt, r.quantize, r.where), []).append(r)
    pairs = []
    for (framework, fmt, quantize, where), members in groups.items():
        if len({converter_name(m) for m in members}) < 2:
            continue
        entries = [PairEntry(converter=converter_name(m), format=m.format, label=m.label, status=m.status,
                             verdict=m.verdict, failing=bool(m.failing), agreement=m.agreement, accuracy=m.accuracy,
                             max_abs_error=m.max_abs_error) for m in members]
        pairs.append(ConverterPair(framework, fmt, quantize, where, entries, _departing(entries)))
    return pairs


def _departing(entries: list[PairEntry]) -> list[str]:
    """A failing converter departs when another passes on the same source; between two that pass, the one whose
    agreement is lower by DEPART_POINTS or more."""
    right = [e for e in entries if not e.failing and e.status == "measured"]
    if not right:
        return []
    wrong = [e.converter for e in entries if e.failing]
    if wrong:
        return wrong
    scored = [e for e in right if e.agreement is not None]
    if len(scored) < 2:
        return []
    best = max(e.agreement for e in scored)
    return [e.converter for e in scored if 100 * (best - e.agreement) >= DEPART_POINTS]


def _pct(v: Any) -> str:
    return f"{100 * float(v):.1f}%" if isinstance(v, (int, float)) else "n/a"
