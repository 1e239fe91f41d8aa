"""Converters checked against each other: the rows of one source converted to
the same artifact format with the same quantization and run in the same place
by different converters (TFLite from litert-torch and from onnx2tf, ...),
side by side, and which of them departs from the source model's own outputs.
Backends likewise: the rows of one converted file (by content) run on several
backends of one target (a browser's wasm and webgpu), and which backend
departs from its wasm twin.
It reads rows — `ReportRow`s as report.summary_rows makes them, or the
`PairRow`s `row_of` makes of Results (findings) — and judges nothing anew:
agreement and accuracy are the rows' own numbers.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any, Protocol, Sequence

from deploytool.convert import FORMATS
from deploytool.value import value

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


@value
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


@value
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


@value(frozen=False)
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


@value(frozen=False)
class BackendPair:
    """One file on several backends of one target: the wasm row and the others, each against the source."""

    framework: str
    artifact_format: str
    quantize: str
    target: str
    entries: list[PairEntry] = field(default_factory=list)  # `converter` holds the backend here
    departs: list[str] = field(default_factory=list)  # backends whose outputs depart where wasm's do not

    @property
    def sentence(self) -> str:
        if not self.departs:
            return ""
        ref = next(e for e in self.entries if e.converter == REFERENCE_BACKEND)
        bad = [e for e in self.entries if e.converter in self.departs]
        said = ", ".join(f"{e.converter} ({_describe(e)})" for e in bad)
        return f"{said} departs from the same file on wasm ({_describe(ref)})"


REFERENCE_BACKEND = "wasm"


def backend_of(row: PairSource) -> tuple[str, str]:
    """`web:webgpu@dev` -> ("web", "webgpu")."""
    where = row.where.split("@")[0]
    target, _, backend = where.partition(":")
    return target, backend


def backend_pairs(rows: Sequence[PairSource]) -> list[BackendPair]:
    """Rows of the same converted file (its sha256) on the wasm backend and on others of the same target."""
    groups: dict[tuple[str, str, str], list[PairSource]] = {}
    for r in rows:
        target, backend = backend_of(r)
        sha = r.artifact.get("sha256")
        if backend and sha:
            groups.setdefault((r.framework, sha, target), []).append(r)
    pairs = []
    for (framework, _sha, target), members in groups.items():
        backends = [backend_of(m)[1] for m in members]
        if REFERENCE_BACKEND not in backends or len(set(backends)) < 2:
            continue
        entries = [PairEntry(converter=b, format=m.format, label=m.label, status=m.status, verdict=m.verdict,
                             failing=bool(m.failing), agreement=m.agreement, accuracy=m.accuracy,
                             max_abs_error=m.max_abs_error) for b, m in zip(backends, members)]
        first = members[0]
        fmt = first.artifact.get("format") or first.format
        pairs.append(BackendPair(framework, fmt, first.quantize, target, entries, _backends_departing(entries)))
    return pairs


def _backends_departing(entries: list[PairEntry]) -> list[str]:
    """A backend departs from its wasm twin when it fails (to run, or its verdict) while wasm does not, or
    agrees with the source by DEPART_POINTS less, or its max |error| is 10x wasm's and above 1e-4."""
    ref = next(e for e in entries if e.converter == REFERENCE_BACKEND)
    if ref.failing or ref.status != "measured":
        return []
    out = []
    for e in entries:
        if e is ref:
            continue
        if e.failing:
            out.append(e.converter)
        elif e.agreement is not None and ref.agreement is not None and \
                100 * (ref.agreement - e.agreement) >= DEPART_POINTS:
            out.append(e.converter)
        elif e.max_abs_error is not None and ref.max_abs_error is not None and \
                e.max_abs_error > max(1e-4, 10 * ref.max_abs_error):
            out.append(e.converter)
    return out


def _describe(e: PairEntry) -> str:
    if e.status != "measured":
        return e.status
    err = f", max |error| {e.max_abs_error:.3g}" if isinstance(e.max_abs_error, (int, float)) else ""
    return f"{_pct(e.agreement)} agreement{err}"


def _pct(v: Any) -> str:
    return f"{100 * float(v):.1f}%" if isinstance(v, (int, float)) else "n/a"
