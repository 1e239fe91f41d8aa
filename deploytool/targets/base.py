"""The target protocol. A target is where a converted model runs (this PC's
host runtimes, headless Chromium, an Android phone, ...). Everything that
differs between targets lives in the target's own module and is asked through
this protocol: which artifact formats it runs (and with which runtime), its
matrix axes, its preflight, its typed options and CLI flags, what its rows
share while a run is open (its session: one browser for all web rows), its
label and how a failing row is reproduced. Nothing outside `targets/`, `runtimes/` and
`devices/` compares a target's name.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import field
from typing import Any, ClassVar, ContextManager, Generic, Iterable, TypeVar

from deploytool.errors import UnknownOption
from deploytool.runtimes import formats_on
from deploytool.targets.flags import TargetFlags
from deploytool.value import value


class TargetOptions:
    """Base of a target's typed options: a dataclass whose `from_dict` refuses unknown keys."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # every subclass is a dataclass

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None, target: str = "") -> "TargetOptions":
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UnknownOption(f"the {target or 'target'} target has no option {', '.join(unknown)}; "
                                f"its options are {', '.join(sorted(known)) or 'none'}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@value
class NoOptions(TargetOptions):
    pass


@value
class RunSettings:
    """Options every runtime takes, from the request."""

    threads: int = 1
    warmup_runs: int = 10
    latency_samples: int | None = None
    timeout_s: float = 600.0


@value
class Position:
    """One point on a target's matrix axes (an Android serial x delegate; a web backend)."""

    device: str = ""
    backend: str = ""


@value(frozen=False)
class Preflight:
    """What a target found before anything runs: its devices and what identifies where its rows run."""

    devices: tuple[str, ...] = ()
    identity: dict[str, str] = field(default_factory=dict)  # enters the key of every row of this target
    # devices named but not found when a lab night is planned (a selector no phone matches) -> why: their rows are
    # recorded `no_worker` with that reason, not run and not left out
    unavailable: dict[str, str] = field(default_factory=dict)


OptionsT = TypeVar("OptionsT", bound=TargetOptions)


class Target(TargetFlags, Generic[OptionsT]):
    """Subclass per target module, generic in its options (`class WebTarget(Target[WebOptions])`, with `Options =
    WebOptions`); register an instance with `deploytool.targets.register`."""

    # `name` and `selectable` come with its flags (targets/flags.TargetFlags)
    label: ClassVar[str] = ""  # for people: "headless Chromium"
    Options: type[OptionsT] = NoOptions  # type: ignore[assignment]  # a target without options: NoOptions
    # A failing row's bug bundle reproducer runs the model in a host runtime; on the host target that *is*
    # the runtime that failed, so the reproducer judges the row itself (exit code 1 when it reproduces).
    judges_itself: ClassVar[bool] = False
    # Its rows' threads run on the CPUs of the machine (the lab worker) that measures them; a phone's run on
    # the phone's own cores.
    threads_on_worker: ClassVar[bool] = True

    # -- options ---------------------------------------------------------------
    def options(self, values: dict[str, Any] | None = None) -> OptionsT:
        return self.Options.from_dict(values, self.name)  # type: ignore[return-value]  # from_dict makes an Options

    # -- the matrix ------------------------------------------------------------
    def formats(self) -> tuple[str, ...]:
        return formats_on(self.name)

    def positions(self, options: OptionsT, preflight: Preflight, artifact_format: str) -> list[Position]:
        """The matrix axes for one artifact format."""
        return [Position()]

    def preflight(self, options: OptionsT, *, run: bool = True) -> Preflight:
        """Find what the target needs (browser, devices) before anything runs; a missing part is one line,
        exit 2. `run=False`: a stored run is being reported, nothing will run."""
        return Preflight()

    # -- the run ------------------------------------------------------------------
    def session(self, options: OptionsT, preflight: Preflight) -> ContextManager[dict[str, Any]]:
        """What this target's rows share while a run is open (a browser, a device connection): a context
        manager opened around a run's rows, yielding runtime options every row then gets on top of
        `runtime_options`. Nothing may start before a row needs it, so a run with nothing to do starts
        nothing. The base shares nothing."""
        return contextlib.nullcontext({})

    # -- one combination ---------------------------------------------------------
    def runtime_options(self, options: OptionsT, settings: RunSettings, position: Position) -> dict[str, Any]:
        return {"threads": settings.threads, "warmup_runs": settings.warmup_runs,
                "latency_samples": settings.latency_samples, "timeout_s": settings.timeout_s}

    def single_run_options(self, runtime_options: dict[str, Any]) -> dict[str, Any]:
        """The options for one quick untimed run (localize's cuts): no warm-up, one latency sample."""
        return {**runtime_options, "warmup_runs": 0, "latency_samples": 1}

    def reproduce_args(self, options: OptionsT, position: Position) -> list[str]:
        """`deploytool migrate` flags that put a row of this target back on the same axes."""
        return []

    def lab_preflight(self, options: OptionsT, resources: dict[str, dict[str, str]]) -> Preflight:
        """The preflight of a lab night, from the resources its workers advertise, each with the facts its worker
        told about it (`resource_facts`); nothing is looked for here."""
        return Preflight()

    def resource_facts(self, resources: set[str]) -> dict[str, dict[str, str]]:
        """Asked on a lab worker when a night is planned: facts about the resources of this target it owns (a
        phone's model and ABI), by resource, for `lab_preflight` on the driver. The base tells none."""
        return {}

    def cell_options(self, options: dict[str, Any], device: str) -> dict[str, Any]:
        """A lab cell's options on the worker that runs it, narrowed to the cell's device (from the lab's)."""
        return options

    def resource(self, position: Position) -> str:
        """The lab resource a row of this target needs (a Dask worker resource): the worker that has it runs it."""
        return self.name

    def local_resources(self, browsers: int = 1) -> dict[str, float]:
        """The lab resources this machine offers for this target's rows now, with how many rows each can run at
        once: what a lab worker here advertises (and re-reads while it runs), by the names `resource` asks for.
        `browsers`: how many browsers may run at once. Nothing that is missing is an error: it is not offered.
        The base offers none."""
        return {}

    def row_identity(self, identity: dict[str, str], position: Position) -> dict[str, str]:
        """What of the preflight's identity enters the key of a row at this position (the base: all of it; the web
        target keeps the WebGPU adapter out of its other rows' keys)."""
        return identity

    def runs_on(self, environment: dict[str, Any], position: Position) -> str:
        """Who ran the model, for a bug report's title: "onnxruntime 1.23 (wasm) in Chromium 156"."""
        runtime = " ".join(str(environment[k]) for k in ("runtime", "runtime_version", "version")
                           if environment.get(k))
        return runtime or self.name
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


