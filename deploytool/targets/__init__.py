"""Registry of targets: one module per target behind `targets.base.Target`, on the one `Registry`
(deploytool.registry). A new target is a module plus one `register` call; the built-in ones are registered lazily
(their machinery, a browser's or a phone's, is imported on the first lookup of their name). Modules named in
$DEPLOYTOOL_PLUGINS are imported on the first lookup (`deploytool.registry.load_plugins`)."""

from __future__ import annotations


from deploytool.errors import UnknownOption
from deploytool.registry import PLUGINS_ENV, Registry, load_plugins
from deploytool.targets.base import NoOptions, Position, Preflight, RunSettings, Target, TargetOptions, expand
from deploytool.targets.flags import AndroidFlags, HostFlags, PcFlags, TargetFlags, WebFlags

TARGETS: Registry[Target] = Registry("target")


def _pc() -> Target:
    from deploytool.targets.pc import PcTarget

    return PcTarget()


def _host() -> Target:
    from deploytool.targets.host import HostTarget

    return HostTarget()


def _web() -> Target:
    from deploytool.targets.web import WebTarget

    return WebTarget()


def _android() -> Target:
    from deploytool.targets.android import AndroidTarget

    return AndroidTarget()


# What the command line needs of a built-in target before it is loaded: its flags and whether --target offers it
# (flags.py). Its class inherits the same flags, so the two cannot differ.
_DECLARED: dict[str, TargetFlags] = {f.name: f for f in (PcFlags(), HostFlags(), WebFlags(), AndroidFlags())}

for _name, _make in (("pc", _pc), ("host", _host), ("web", _web), ("android", _android)):
    TARGETS.lazy(_name, _make)


def register(target: Target) -> Target:
    """Add a target (an instance of a `Target` subclass); its runtimes register with `runtimes.register`."""
    if not target.name:
        raise ValueError("a target needs a name")
    return TARGETS.add(target.name, target)


def unregister(name: str) -> None:
    TARGETS.unregister(name)


def names() -> list[str]:
    return list(TARGETS)


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise UnknownOption(f"unknown target {name!r}; targets are {', '.join(selectable())}")
    return TARGETS[name]


def selectable() -> list[str]:
    """The targets `--target` offers, in order (a built-in target not loaded yet stays so)."""
    return [t.name for t in target_flags() if t.selectable]


def target_flags() -> list[TargetFlags]:
    """Every target's command-line flags, in order: a built-in target not loaded yet by its declaration
    (flags.py), so that building and reading the command line loads no browser or phone machinery; any other
    target (a plugin's, a test's, a built-in one replaced) itself."""
    return [_DECLARED[n] if n in _DECLARED and TARGETS.is_lazy(n) else get_target(n) for n in names()]


def all_targets() -> list[Target]:
    return [get_target(n) for n in names()]


__all__ = ["PLUGINS_ENV", "TARGETS", "NoOptions", "Position", "Preflight", "RunSettings", "Target", "TargetOptions", "all_targets",
           "expand", "get_target", "load_plugins", "names", "register", "selectable", "target_flags", "unregister"]
