"""Which phones a run means: device selectors and their resolution to serials.
A selector is a serial (`serial:XYZ`, or bare as adb prints it, `host:port`
included), a phone model (`model:Pixel 7`, its ro.product.model), an ABI
(`abi:arm64-v8a`, its ro.product.cpu.abi) or `every` ready phone. This module
only parses and matches against facts it is given; it asks no device anything."""

from __future__ import annotations

from dataclasses import field

from deploytool.errors import UnknownOption
from deploytool.value import value

KINDS = ("serial", "model", "abi")  # the facts a phone is selected by, each a key of its facts
EVERY = "every"


def parse(selector: str) -> tuple[str, str]:
    """(kind, value) of one selector; a bare serial is ("serial", it). An unknown kind is a one-line error."""
    kind, sep, value = selector.partition(":")
    if selector == EVERY:
        return EVERY, ""
    # a network phone's serial is host:port: only a word before the colon, not followed by a port, is a kind
    if not sep or not kind.isalpha() or value.isdigit():
        return "serial", selector
    if kind not in KINDS:
        raise UnknownOption(f"device selector {selector!r} has an unknown kind {kind!r}; selectors are a serial, "
                            f"serial:SERIAL, model:MODEL (ro.product.model), abi:ABI (ro.product.cpu.abi) or every")
    if not value:
        raise UnknownOption(f"device selector {selector!r} names no {kind}")
    return kind, value


@value
class Resolved:
    serials: tuple[str, ...]  # in the order the selectors name them, each once
    unmatched: dict[str, str] = field(default_factory=dict)  # selector -> why no phone is chosen by it


def resolve(selectors: tuple[str, ...], phones: dict[str, dict[str, str]]) -> Resolved:
    """Serials chosen by `selectors` among `phones` ({serial: {"model": ..., "abi": ...}}). No selectors, or
    `every`: all phones. A serial is kept even when it is not among `phones` (it may be plugged in yet); a model or
    ABI that no phone has is unmatched, with the phones that were there."""
    chosen: list[str] = []
    unmatched: dict[str, str] = {}
    for selector in selectors or (EVERY,):
        kind, value = parse(selector)
        if kind == EVERY:
            found = sorted(phones)
        elif kind == "serial":
            found = [value]
        else:
            found = sorted(s for s, facts in phones.items() if facts.get(kind) == value)
        if not found:
            unmatched[selector] = f"no ready phone matches the device selector {selector!r} ({_seen(phones)})"
        chosen += [s for s in found if s not in chosen]
    return Resolved(tuple(chosen), unmatched)


def _seen(phones: dict[str, dict[str, str]]) -> str:
    if not phones:
        return "no phone is ready"
    return "ready: " + "; ".join(f"{s} model {f.get('model') or '?'} abi {f.get('abi') or '?'}"
                                  for s, f in sorted(phones.items()))
