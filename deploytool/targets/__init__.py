"""Registry of targets: one module per target behind `targets.base.Target`.
A new target is a module plus one `register` call (built-in ones are listed
here and imported only when asked for); nothing else changes. Modules named in
$DEPLOYTOOL_PLUGINS are imported on the first lookup (`deploytool.registry.load_plugins`)."""

from __future__ import annotations

import importlib
from typing import Iterable

from deploytool.errors import UnknownOption
from deploytool.registry import PLUGINS_ENV, load_plugins
from deploytool.targets.base import NoOptions, Position, Preflight, RunSettings, Target, TargetOptions

_BUILTIN = {
    "pc": "deploytool.targets.pc:PcTarget",
    "host": "deploytool.targets.host:HostTarget",
    "web": "deploytool.targets.web:WebTarget",
    "android": "deploytool.targets.android:AndroidTarget",
}
_REGISTERED: dict[str, Target] = {}


def register(target: Target) -> Target:
    """Add a target (an instance of a `Target` subclass); its runtimes register with `runtimes.register`."""
    if not target.name:
        raise ValueError("a target needs a name")
    _REGISTERED[target.name] = target
    return target


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def names() -> list[str]:
    load_plugins()
    return list(dict.fromkeys([*_BUILTIN, *_REGISTERED]))


def get_target(name: str) -> Target:
    load_plugins()
    if name not in _REGISTERED:
        ref = _BUILTIN.get(name)
        if ref is None:
            raise UnknownOption(f"unknown target {name!r}; targets are {', '.join(selectable())}")
        module, cls = ref.split(":")
        _REGISTERED[name] = getattr(importlib.import_module(module), cls)()
    return _REGISTERED[name]


def selectable() -> list[str]:
    """The targets `--target` offers, in order."""
    return [n for n in names() if get_target(n).selectable]


def all_targets() -> list[Target]:
    return [get_target(n) for n in names()]


def expand(values: Iterable[str], allowed: Iterable[str], what: str) -> list[str]:
    """`("a,b", "all")` -> the named items, in order, once each; an unknown one is a one-line error."""
    allowed = list(allowed)
    out: list[str] = []
    for v in values:
        for item in str(v).split(","):
            item = item.strip()
            if not item:
                continue
            if item == "all":
                out.extend(allowed)
            elif item not in allowed:
                raise UnknownOption(f"unknown {what} {item!r}; choose from {', '.join(allowed)} or all")
            else:
                out.append(item)
    return list(dict.fromkeys(out))


__all__ = ["PLUGINS_ENV", "NoOptions", "Position", "Preflight", "RunSettings", "Target", "TargetOptions", "all_targets",
           "expand", "get_target", "load_plugins", "names", "register", "selectable", "unregister"]
