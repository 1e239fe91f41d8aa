"""`@value` (deploytool/value.py) is `@dataclass(frozen=True)` / `@dataclass` with shared __eq__, __hash__ and
__repr__: each class here is declared twice, once each way, and must behave the same."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import FrozenInstanceError, dataclass, field, fields, replace

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

    std = dataclass(frozen=frozen)(body())
    ours = value(frozen=frozen)(body())
    return std, ours


@pytest.mark.parametrize("frozen", [True, False])
def test_a_value_compares_shows_and_hashes_as_a_dataclass(frozen):
    std, ours = twins(frozen)
    for make in (lambda c: c(1), lambda c: c(2, 3.0, ("a",), "n", 2.0)):
        a, b = make(std), make(ours)
        assert repr(a) == repr(b)  # the class's qualname, then every field with repr=True, in order
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert [f.name for f in fields(ours)] == [f.name for f in fields(std)]
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
                cls(1).x = 2  # type: ignore[misc]
            with pytest.raises(FrozenInstanceError):
                del cls(1).x  # type: ignore[misc]
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
