"""The one registry style: a `Registry` is a read-only mapping name -> entry, filled by its implementations.
Each implementation module registers itself with the registry's decorator when it is imported (as Hugging
Face Optimum's `register_in_tasks_manager` does), and its package imports its modules, so that importing the
package fills the registry; there is no list of names to keep in step with the modules.

    ARCHITECTURES = Registry("architecture")

    @ARCHITECTURES.register("lenet5")
    def _lenet5(num_classes): ...

A module outside deploytool registers the same way; naming it in $DEPLOYTOOL_PLUGINS (comma-separated module
names) imports it in every deploytool process, the child processes that convert and measure included: any
registry's first lookup imports them (`load_plugins`). `lookup(name)` refuses an unknown name in one line naming the
registered ones; a package that means something else by a name it lacks keeps its own words.
"""

from __future__ import annotations

import importlib
import os
from typing import Callable, Generic, Iterator, Mapping, TypeVar, cast

from deploytool.errors import DeploytoolError, UnknownOption, first_line_of

T = TypeVar("T")
E = TypeVar("E")

PLUGINS_ENV = "DEPLOYTOOL_PLUGINS"  # modules (comma-separated) that register more targets, converters, ... when imported
_plugins_loaded = False


def load_plugins() -> None:
    """Import the modules named in $DEPLOYTOOL_PLUGINS once (each registers what it adds)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for module in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise UnknownOption(f"${PLUGINS_ENV} names {module!r}, which cannot be imported ({e}); "
                                "fix or unset it") from None
        except SystemExit as e:  # a plugin must not end deploytool (nor make a failed run look like success)
            raise UnknownOption(f"${PLUGINS_ENV} module {module!r} called sys.exit({e.code!r}) while loading; "
                                "a plugin registers what it adds and returns: fix or unset it") from None
        except DeploytoolError:
            raise  # what it registered was refused (a name taken, a function for a runtime): its own words
        except Exception as e:  # its own bug, at import: the user's to fix, said in one line
            first = first_line_of(str(e), 200)
            raise UnknownOption(f"${PLUGINS_ENV} module {module!r} failed while loading ({type(e).__name__}"
                                f"{': ' + first if first else ''}); fix or unset it") from None


class _Lazy(Generic[T]):
    """A registered entry not made yet: `load` imports its module and makes it."""

    def __init__(self, load: Callable[[], T]):
        self.load = load


class Registry(Mapping[str, T], Generic[T]):
    """name -> entry, in the order the entries were registered. Registering a name again replaces its entry
    (in its place); `unregister` removes it (tests register doubles for a while). An entry whose module is costly
    to import (a target's machinery) is registered `lazy`: a function that imports it with a plain import (which
    import-linter and mypy see) and returns the entry, called on the first lookup of its name."""

    def __init__(self, what: str):
        self.what = what  # what one entry is, for messages: "architecture"
        self._entries: dict[str, T | _Lazy[T]] = {}

    def register(self, name: str) -> Callable[[E], E]:
        """The decorator: `@REGISTRY.register(name)` above what is registered (returned unchanged)."""

        def decorate(entry: E) -> E:
            self.add(name, cast(T, entry))  # E is a T; a TypeVar cannot be bound to the class's T
            return entry

        return decorate

    def add(self, name: str, entry: T) -> T:
        if not name:
            raise ValueError(f"a registered {self.what} needs a name")
        self._entries[name] = entry
        return entry

    def lazy(self, name: str, loader: Callable[[], T]) -> None:
        """Register `name` now and its entry when it is first looked up (`loader()` imports and makes it)."""
        if not name:
            raise ValueError(f"a registered {self.what} needs a name")
        self._entries[name] = _Lazy(loader)

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def is_lazy(self, name: str) -> bool:
        """`name` is registered `lazy` and not looked up yet (its module not imported)."""
        return isinstance(self._entries.get(name), _Lazy)

    # -- the mapping: every lookup sees the plugins' entries too ---------------------------------------------
    def __getitem__(self, name: str) -> T:
        load_plugins()
        entry = self._entries[name]
        if isinstance(entry, _Lazy):
            entry = self._entries[name] = entry.load()  # in its place: the order stays the registration's
        return entry

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(list(self._entries))

    def __len__(self) -> int:
        load_plugins()
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        return tuple(self)

    def lookup(self, name: str) -> T:
        """The entry of `name`, or UnknownOption naming the registered ones: `unknown task 'x'; tasks are ...`."""
        if name not in self:
            raise UnknownOption(f"unknown {self.what} {name!r}; {self.what}s are {', '.join(self)}")
        return self[name]

    def registered_so_far(self, name: str) -> bool:
        """`name` is registered already, the plugins left unimported: for a check made while modules are still
        registering (a lookup would import the plugins, which may import the module that is registering)."""
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"


__all__ = ["PLUGINS_ENV", "Registry", "load_plugins"]
