"""Value objects: `@value` is `@dataclass(frozen=True)` and `@value(frozen=False)` is `@dataclass`, with methods
that behave the same but are shared code (closures over the class's fields) instead of source text that the
dataclasses module writes and compiles for every class and method.

Why: compiling is what makes a dataclass slow to define (~0.65 ms a class here; Python 3.13 is no faster), and a
command defines every class of every module it imports. `deploytool migrate` with a user's ONNX model defines 76,
24 of them never used in that run: 50 ms of a 0.3 s command (bench/bench_user_onnx.py); with `@value`, 13 ms.

The dataclasses module still does everything else: it collects the fields (`field(...)`, defaults, inheritance,
the mutable-default check), so `fields`, `replace`, `asdict` and `__match_args__` are the stdlib's own; a type
checker reads `@value` as a dataclass (`dataclass_transform`). What a class body defines wins, as with
`@dataclass`. A frozen value's `__setattr__` and `__delattr__` are shared too, and the stdlib's record of the class
says frozen, so a plugin's `@dataclass(frozen=True)` may subclass a value (the stdlib then writes its own guards)
and a value a frozen dataclass. Refused here, by name (use `@dataclass` for them): InitVar, keyword-only and
init=False fields. `inspect.signature` and help() show the fields, as for a dataclass (built when asked). What
differs: creating an instance costs ~0.5 µs more (1.3-1.9 µs against 1.05 µs for five fields).
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
        documented = bool(c.__dict__.get("__doc__"))
        guard = frozen and _guard_here(c)
        dataclasses.dataclass(init=False, eq=False, repr=False, frozen=frozen and not guard)(c)  # in place
        fields = _plain_fields(c)
        if guard:
            _guard(c, fields)
        _install(c, fields, frozen, explicit_hash)
        type.__setattr__(c, "__signature__", _SIGNATURE)  # what help() and inspect show: the fields, as @dataclass's
        if not documented:
            type.__setattr__(c, "__doc__", _DOC)
        return c

    return wrap if cls is None else wrap(cls)


def _guard_here(cls: type) -> bool:
    """Whether this frozen class gets the shared __setattr__/__delattr__ (`_guard`): yes unless a base is a frozen
    dataclass, whose class the dataclasses module must see declared frozen too (it then writes them itself). The
    dataclasses module's rules, checked here where it cannot: no frozen class over a mutable dataclass, and no
    __setattr__ or __delattr__ of the class's own."""
    bases = [b.__dict__["__dataclass_params__"] for b in cls.__mro__[1:] if "__dataclass_fields__" in b.__dict__]
    if any(p.frozen for p in bases):
        return False
    if bases:
        raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    return True


def _guard(cls: Any, fields: tuple[dataclasses.Field[Any], ...]) -> None:
    """A frozen class's __setattr__ and __delattr__, as the dataclasses module writes them: on the class itself
    nothing may be set or deleted, on a subclass that is no dataclass its fields may not. The stdlib's record of
    the class says frozen, so a frozen dataclass (a plugin's) may subclass it."""
    names = frozenset(f.name for f in fields)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        setattr(cls, method.__name__, method)
    cls.__dataclass_params__.frozen = True


def _has_explicit_hash(cls: type) -> bool:
    """The class body defines __hash__ (a body that defines only __eq__ gets __hash__ = None from Python: not
    explicit), by the dataclasses module's own rule."""
    h = cls.__dict__.get("__hash__", dataclasses.MISSING)
    return not (h is dataclasses.MISSING or (h is None and "__eq__" in cls.__dict__))


def _plain_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The class's fields, each a positional-or-keyword argument of __init__; anything else is refused."""
    fields = dataclasses.fields(cls)
    odd = [f.name for f in cls.__dict__["__dataclass_fields__"].values()  # InitVars are left out of fields():
           if repr(getattr(f, "_field_type", "")) == "_FIELD_INITVAR"]  # the stdlib's own mark (no public name)
    odd += [f.name for f in fields if not f.init or f.kw_only]
    if odd:
        raise TypeError(f"@value does not take InitVar, init=False or keyword-only fields ({', '.join(odd)} of "
                        f"{cls.__qualname__}): use @dataclass for this class")
    seen_default = False
    for f in fields:
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has_default
    return fields


def _install(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool, explicit_hash: bool) -> None:
    """The four methods as closures over one class's field names, each installed unless the body has it."""
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

    methods: dict[str, Any] = {"__init__": _init(cls, fields, frozen), "__eq__": __eq__, "__repr__": __repr__}
    methods = {k: m for k, m in methods.items() if k not in cls.__dict__}
    if not explicit_hash:  # as @dataclass(eq=True): a frozen class hashes its fields, a mutable one is unhashable
        methods["__hash__"] = __hash__ if frozen else None
    for name, method in methods.items():
        if method is not None:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> Callable[..., None]:
    """__init__(self, <every field, in order>): arguments bound as Python binds them (the same TypeErrors), then
    defaults and default factories, then `__post_init__()` if the class has one."""
    names = tuple(f.name for f in fields)
    known = frozenset(names)
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    factories = {f.name: f.default_factory for f in fields if f.default_factory is not dataclasses.MISSING}
    put = object.__setattr__ if frozen else setattr
    post_init = hasattr(cls, "__post_init__")
    where = f"{cls.__qualname__}.__init__()"

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{where} takes {len(names) + 1} positional arguments but {len(args) + 1} were given")
        given = dict(zip(names, args))
        for k in kwargs:
            if k in given:
                raise TypeError(f"{where} got multiple values for argument {k!r}")
            if k not in known:
                raise TypeError(f"{where} got an unexpected keyword argument {k!r}")
        given.update(kwargs)
        if len(given) < len(names):
            missing = [n for n in names if n not in given and n not in defaults and n not in factories]
            if missing:
                raise TypeError(f"{where} missing {len(missing)} required argument{'s' * (len(missing) > 1)}: "
                                f"{', '.join(map(repr, missing))}")
            for n in names:
                if n not in given:
                    given[n] = defaults[n] if n in defaults else factories[n]()
        for n in names:
            put(self, n, given[n])
        if post_init:
            self.__post_init__()

    return __init__


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # how @dataclass's signature shows a default made by a factory


class _LazySignature:
    """A value class's `inspect.signature`, built from its fields when something asks (help(), an IDE's runtime
    introspection); never for a command that only runs."""

    def __get__(self, obj: Any, owner: type) -> Any:
        import inspect

        if obj is not None:
            raise AttributeError("__signature__")
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(f.name, kind, annotation=f.type, default=(
            f.default if f.default is not dataclasses.MISSING else
            _Factory() if f.default_factory is not dataclasses.MISSING else inspect.Parameter.empty))
            for f in dataclasses.fields(owner)]
        return inspect.Signature(params, return_annotation=None)


class _LazyDoc:
    """An undocumented value class's docstring, as @dataclass writes it: its name and signature."""

    def __get__(self, obj: Any, owner: type) -> str:
        import inspect

        return owner.__name__ + str(inspect.signature(owner)).replace(" -> None", "")


_SIGNATURE, _DOC = _LazySignature(), _LazyDoc()


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The named attributes of an object as a tuple, as the generated methods build it."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = names[0]
        return lambda o: (getattr(o, one),)
    return lambda o: ()
