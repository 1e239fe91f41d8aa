"""Value objects: `@value` is `@dataclass(frozen=True)` and `@value(frozen=False)` is `@dataclass`, with the same
`__eq__`, `__hash__` and `__repr__`, but those three are one shared implementation per class (closures over its
field names) instead of source text that the dataclasses module writes and compiles for every class.

Why: compiling is what makes a dataclass slow to define. On the path of `deploytool migrate` with a user's ONNX
model, 76 classes spent 50 ms of a 0.3 s run in `dataclasses._create_fn`, ~40% of it in these three methods
(bench/bench_user_onnx.py; Python 3.13 is not faster). `__init__` and a frozen class's `__setattr__` and
`__delattr__` stay the dataclasses module's own. Everything else is the stdlib's too: `fields`, `replace`, `asdict`,
`field(...)` and `__match_args__` work unchanged, and a method written in the class body wins, as with `@dataclass`.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Callable, TypeVar, dataclass_transform, overload

_C = TypeVar("_C", bound=type)


@overload
def value(cls: _C, /) -> _C: ...


@overload
def value(*, frozen: bool = True) -> Callable[[_C], _C]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def value(cls: Any = None, /, *, frozen: bool = True) -> Any:
    """`@value` or `@value(frozen=False)` on a class: a dataclass (see the module's docstring)."""

    def wrap(c: _C) -> _C:
        explicit_hash = _has_explicit_hash(c)
        dataclasses.dataclass(frozen=frozen, eq=False, repr=False)(c)  # the same class, completed in place
        _install(c, frozen, explicit_hash)
        return c

    return wrap if cls is None else wrap(cls)


def _has_explicit_hash(cls: type) -> bool:
    """The class body defines __hash__ (a body that defines only __eq__ gets __hash__ = None from Python: not
    explicit), by the dataclasses module's own rule."""
    h = cls.__dict__.get("__hash__", dataclasses.MISSING)
    return not (h is dataclasses.MISSING or (h is None and "__eq__" in cls.__dict__))


def _install(cls: type, frozen: bool, explicit_hash: bool) -> None:
    fields = dataclasses.fields(cls)
    compared = _getter(tuple(f.name for f in fields if f.compare))
    hashed = _getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    shown = tuple(f.name for f in fields if f.repr)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @recursive_repr()
    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    methods: dict[str, Any] = {name: m for name, m in (("__eq__", __eq__), ("__repr__", __repr__))
                               if name not in cls.__dict__}
    if not explicit_hash:  # as @dataclass(eq=True): a frozen class hashes its fields, a mutable one is unhashable
        methods["__hash__"] = __hash__ if frozen else None
    for name, method in methods.items():
        if method is not None:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The named attributes of an object as a tuple, as the generated methods build it."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = names[0]
        return lambda o: (getattr(o, one),)
    return lambda o: ()
