"""`@value` (deploytool/value.py) is `@dataclass(frozen=True)` / `@dataclass` with shared __eq__, __hash__ and
__repr__: each class here is declared twice, once each way, and must behave the same."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from dataclasses import FrozenInstanceError, dataclass, field, fields, replace
from typing import Any

import pytest

from deploytool.value import value


def twins(frozen: bool) -> tuple[type, type]:
    """The same class body as a stdlib dataclass and as a value."""

    def body() -> type:
        class Point:
            x: int
            y: float = 0.5
            tags: tuple[str, ...] = ()
            note: str = field(default="", compare=False, repr=False)
            weight: float = field(default=1.0, hash=False)

        return Point

    std: type = dataclass(frozen=frozen)(body())
    ours: type = value(frozen=frozen)(body())
    return std, ours


@pytest.mark.parametrize("frozen", [True, False])
def test_a_value_compares_shows_and_hashes_as_a_dataclass(frozen):
    std, ours = twins(frozen)
    for make in (lambda c: c(1), lambda c: c(2, 3.0, ("a",), "n", 2.0)):
        a, b = make(std), make(ours)
        assert repr(a) == repr(b)  # the class's qualname, then every field with repr=True, in order
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert [f.name for f in fields(ours)] == [f.name for f in fields(std)]
    assert str(inspect.signature(ours)) == str(inspect.signature(std))  # what help() shows, defaults and factories
    assert ours.__doc__ == std.__doc__ == "Point(x: 'int', y: 'float' = 0.5, tags: 'tuple[str, ...]' = (), note: 'str' = '', weight: 'float' = 1.0)"
    for cls in (std, ours):
        assert cls(1, note="x") == cls(1, note="y")  # compare=False is left out
        assert cls(1) != cls(1, 0.25)
        assert cls(1).__eq__(object()) is NotImplemented
        assert (cls(1) == 1) is False
        assert replace(cls(1), y=2.0) == cls(1, 2.0)
        assert copy.deepcopy(cls(1, tags=("t",))) == cls(1, tags=("t",))
        if frozen:
            assert hash(cls(1, weight=3.0)) == hash(cls(1, weight=4.0))  # hash=False is left out
            assert hash(cls(1, note="x")) == hash(cls(1, note="y"))
            assert len({cls(1), cls(1), cls(2)}) == 2
            with pytest.raises(FrozenInstanceError):
                cls(1).x = 2
            with pytest.raises(FrozenInstanceError):
                del cls(1).x
        else:
            assert cls.__hash__ is None  # mutable and compared: unhashable
            with pytest.raises(TypeError):
                hash(cls(1))


def test_a_value_keeps_methods_of_its_own_body_and_hashes_like_a_dataclass():
    @value
    class Shown:
        a: int

        def __repr__(self) -> str:
            return "mine"

    @value
    class OnlyEq:  # Python sets __hash__ = None beside an __eq__: not explicit, so a frozen class still hashes
        a: int

        def __eq__(self, other: object) -> bool:
            return True

    @value(frozen=False)
    class Hashed:
        a: int

        def __hash__(self) -> int:
            return 7

    assert repr(Shown(1)) == "mine" and Shown(1) == Shown(1) and hash(Shown(1)) == hash(Shown(1))
    assert OnlyEq(1) == OnlyEq(2) and isinstance(hash(OnlyEq(1)), int)
    assert hash(Hashed(1)) == 7 and Hashed(1) == Hashed(1)


def test_a_recursive_value_shows_dots_and_a_subclass_compares_apart():
    @value(frozen=False)
    class Node:
        child: object = None

    n = Node()
    n.child = n
    assert repr(n) == "test_a_recursive_value_shows_dots_and_a_subclass_compares_apart.<locals>.Node(child=...)"

    @value
    class Base:
        a: int

    @value
    class Sub(Base):
        b: int = 0

    assert Base(1) != Sub(1) and Sub(1, 2) == Sub(1, 2) and Sub(1, 2) != Sub(1, 3)
    assert repr(Sub(1, 2)).endswith("Sub(a=1, b=2)")
    assert Sub.__eq__.__qualname__.endswith("Sub.__eq__")


@pytest.mark.parametrize("frozen", [True, False])
def test_a_value_binds_its_arguments_as_a_dataclass_does(frozen):
    std, ours = twins(frozen)
    for cls in (std, ours):
        assert cls(1).tags == () and cls(x=1, y=2.0).y == 2.0 and cls(1, 2.0, ("a",)).tags == ("a",)
        for args, kwargs in (((), {}), ((1, 2.0, (), "n", 1.0, "extra"), {}), ((1,), {"x": 2}),
                             ((1,), {"nope": 2}), ((), {"y": 2.0})):
            with pytest.raises(TypeError):
                cls(*args, **kwargs)

    calls = []

    def body() -> type:
        class Made:
            a: int
            seen: list = field(default_factory=list)

            def __post_init__(self) -> None:
                calls.append(type(self).__name__)

        return Made

    for make in (dataclass(frozen=frozen), value(frozen=frozen)):
        made: Any = make(body())
        one, two = made(1), made(2)
        assert one.seen == [] and one.seen is not two.seen  # a factory per instance
    assert calls == ["Made"] * 4  # __post_init__ after every __init__, both ways


def test_a_frozen_value_guards_its_fields_as_a_frozen_dataclass_does():
    std, ours = twins(True)
    for cls in (std, ours):
        # a subclass that is no dataclass: its own attributes may be set, the fields not
        class Plain(cls):  # type: ignore[valid-type, misc]
            pass

        p = Plain(1)
        p.extra = 1
        with pytest.raises(FrozenInstanceError):
            p.x = 2
        with pytest.raises(FrozenInstanceError):
            cls(1).extra = 1  # the class itself: nothing may be set
        obj = cls(1)
        object.__setattr__(obj, "x", 5)  # what a __post_init__ does to fill a derived field
        assert obj.x == 5


def test_value_refuses_what_it_does_not_implement_and_what_dataclass_refuses():
    with pytest.raises(TypeError, match="use @dataclass"):
        @value
        class KwOnly:
            a: int = field(kw_only=True)
    with pytest.raises(TypeError, match="use @dataclass"):
        @value
        class NoInit:
            a: int = field(init=False, default=0)
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @value
        class Order:
            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(ValueError, match="mutable default"):
        @value
        class Mutable:
            a: list = []
    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
        @value
        class Own:
            a: int

            def __setattr__(self, name: str, v: object) -> None:
                pass

    @value
    class Frozen:
        a: int

    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        @value(frozen=False)
        class Thawed(Frozen):  # type: ignore[misc]
            b: int = 0
    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
        @value
        class Refrozen(dataclass(type("Base", (), {"__annotations__": {"a": "int"}}))):  # type: ignore[misc]
            b: int = 0

    @value(frozen=False)
    class OwnInit:
        a: int

        def __init__(self, text: str) -> None:
            self.a = int(text)

    assert OwnInit("3").a == 3


def test_values_and_frozen_dataclasses_subclass_each_other():
    """A plugin's options: @dataclass(frozen=True) over a deploytool value, and the other way round."""

    @value
    class Options:
        threads: int = 1

    @dataclass(frozen=True)
    class PluginOptions(Options):
        delegate: str = "cpu"

    @value
    class MoreOptions(PluginOptions):
        extra: int = 0

    assert dataclasses.fields(Options)[0].name == "threads" and Options.__dataclass_params__.frozen  # type: ignore[attr-defined]
    for cls in (PluginOptions, MoreOptions):
        o = cls(2, "gpu")
        assert (o.threads, o.delegate) == (2, "gpu") and o == cls(2, "gpu") and hash(o) == hash(cls(2, "gpu"))
        with pytest.raises(FrozenInstanceError):
            o.threads = 3  # type: ignore[misc]
    assert repr(MoreOptions()).endswith("MoreOptions(threads=1, delegate='cpu', extra=0)")
