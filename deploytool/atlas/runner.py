"""An atlas run: the chosen architectures built at one tier (deploytool.atlas.build), then each migrated by the same
`migrate` the CLI runs — one run per architecture, so every row is a normal stored row with its report, bundles
and findings — and the grid written (deploytool.atlas.page). An architecture that fails to build, or whose migrate
refuses or breaks, is that architecture's row of the grid; the atlas goes on. What ran is kept in `atlas.json`
beside the page, so the page can be drawn again from the store."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, field
from pathlib import Path
from typing import Any, Callable

from deploytool.atlas.architecture import ATLAS, FAMILIES, Built
from deploytool.atlas.build import build_all
from deploytool.atlas.grid import AtlasEntry
from deploytool.atlas.page import atlas_dir, write_page
from deploytool.errors import DeploytoolError, UnknownOption, first_line_of
from deploytool.migrate import MigrateRequest, migrate
from deploytool.runtimes.isolated import runtime_workers
from deploytool.runtimes.web_session import web_session
from deploytool.convert.lanes import shared_converters
from deploytool.data.check import PIXELS_UNDER_SCALE_1
from deploytool.value import value
from deploytool.workspace import Workspace

# the quick tier times few samples: its latencies say which route is slow, not by how much to the percent
QUICK_LATENCY_SAMPLES, QUICK_WARMUP = 5, 1


@value(frozen=False)
class AtlasRequest:
    tier: str = "quick"
    architectures: tuple[str, ...] = ()  # names, providers ("torchvision") or families ("audio"); empty: all
    targets: tuple[str, ...] = ("host", "web")
    formats: tuple[str, ...] = ("all",)
    quantize: tuple[str, ...] = ("all",)
    target_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    latency_samples: int | None = None  # None: the tier's (quick: 5; full: every test sample)
    warmup_runs: int | None = None
    timeout_s: float = 900.0
    fresh: bool = False


@value(frozen=False)
class AtlasOutcome:
    tier: str
    entries: list[AtlasEntry]
    seconds: float
    page: Path | None = None


def select(words: tuple[str, ...]) -> list[str]:
    """The architectures `words` name: a full name, a provider (`keras`, `torchvision`, `transformers`), a family
    (`audio`), or a unique suffix (`bert`); none: every architecture."""
    names = list(ATLAS)
    if not words:
        return names
    chosen: list[str] = []
    for word in (w.strip() for ws in words for w in ws.split(",") if w.strip()):
        hits = [n for n in names if n == word or n.split("/")[0] == word or ATLAS[n].family == word]
        hits = hits or [n for n in names if n.split("/")[1] == word]
        if not hits:
            raise UnknownOption(f"--arch {word}: no such architecture, provider or family; `deploytool atlas --list` "
                                f"lists them (families: {', '.join(FAMILIES)})")
        chosen += [n for n in hits if n not in chosen]
    return chosen


def run_atlas(req: AtlasRequest, workspace: str | Path | None = None, db_url: str | None = None,
              log: Callable[[str], None] = print, progress: bool = False) -> AtlasOutcome:
    t0 = time.perf_counter()
    ws = Workspace.open(workspace)
    names = select(req.architectures)
    # architectures not chosen this time keep their line from the tier's last atlas: re-running one redraws the grid
    last = _last_entries(ws, req.tier)
    builds = build_all(names, req.tier, ws, log)
    entries: list[AtlasEntry] = []
    # the architectures' runs share the measuring and the converting workers (each framework imported once) and
    # one browser session (Chromium launched once)
    with runtime_workers(), shared_converters(), web_session():
        for name in names:
            arch, built = ATLAS[name], builds[name]
            entry = AtlasEntry(name, arch.family, arch.provider)
            if isinstance(built, str):
                entry.error = built
            else:
                entry.built = built.to_json()
                _migrate(entry, built, req, ws, db_url, log, progress, arch.pixels)
            log(f"atlas: {name}: " + (f"run {entry.run_id} ({entry.seconds:.0f} s)" if entry.run_id else entry.error))
            entries.append(entry)
            _save(ws, req, merged(last, entries))  # after each architecture: an interrupted atlas keeps them
    ran = len(entries)
    entries = merged(last, entries)
    seconds = time.perf_counter() - t0
    if len(entries) > ran:  # lines kept from the last atlas: the grid's time is its lines' migrate times
        seconds = sum(e.seconds for e in entries)
    outcome = AtlasOutcome(req.tier, entries, seconds)
    outcome.page = write_page(ws, db_url, req.tier, entries, outcome.seconds)
    _save(ws, req, entries, outcome.seconds)
    return outcome


def data_warning(pixels: str, log: Callable[[str], None]) -> Callable[[str], None]:
    """What the atlas does with a test set's preprocessing warning (deploytool.data.check): logs it, indented, but
    the one about 0-255 pixels under --scale 1 when the architecture takes 0-255 pixels by design (its model
    rescales inside itself): there the warning meant for a user's data would be wrong."""

    def warn(line: str) -> None:
        if not (pixels == "0-255" and line.startswith(PIXELS_UNDER_SCALE_1)):
            log(f"  {line}")

    return warn


def _migrate(entry: AtlasEntry, built: Built, req: AtlasRequest, ws: Workspace, db_url: str | None,
             log: Callable[[str], None], progress: bool, pixels: str) -> None:
    quick = req.tier == "quick"
    mreq = MigrateRequest(
        model=str(built.model), test_npz=built.data, frameworks=("all",), formats=req.formats, quantize=req.quantize,
        targets=req.targets, target_options={k: dict(v) for k, v in req.target_options.items()},
        latency_samples=req.latency_samples or (QUICK_LATENCY_SAMPLES if quick else None),
        warmup_runs=req.warmup_runs if req.warmup_runs is not None else (QUICK_WARMUP if quick else 10),
        timeout_s=req.timeout_s, fresh=req.fresh, random_weights=True)  # built with random weights
    t = time.perf_counter()
    try:
        out = migrate(mreq, ws.root, db_url, progress=progress, log=log, warn=data_warning(pixels, log))
        entry.run_id = out.run_id
    except KeyboardInterrupt:
        raise
    except DeploytoolError as e:  # the model or its data refused before any row (a finding of the atlas itself)
        entry.error = f"migrate refused it: {first_line_of(str(e), 300)}"
    except Exception as e:  # deploytool's own fault on this model: its line, and the atlas goes on
        entry.error = f"migrate failed: {type(e).__name__}: {first_line_of(str(e), 300)}"
    entry.seconds = round(time.perf_counter() - t, 1)


def _save(ws: Workspace, req: AtlasRequest, entries: list[AtlasEntry], seconds: float | None = None) -> None:
    folder = atlas_dir(ws, req.tier)
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"request": asdict(req), "seconds": seconds, "entries": [asdict(e) for e in entries]}
    (folder / "atlas.json").write_text(json.dumps(doc, indent=1, default=str))


def merged(last: list[AtlasEntry], fresh: list[AtlasEntry]) -> list[AtlasEntry]:
    """The grid's lines: this run's, and the last atlas' lines of the architectures it did not run (an architecture
    no longer in the atlas dropped), in the atlas' order."""
    order = {name: i for i, name in enumerate(ATLAS)}
    ran = {e.name for e in fresh}
    lines = [*fresh, *(e for e in last if e.name not in ran and e.name in order)]
    return sorted(lines, key=lambda e: order.get(e.name, len(order)))


def _last_entries(ws: Workspace, tier: str) -> list[AtlasEntry]:
    try:
        return load_entries(ws, tier)[0]
    except (UnknownOption, ValueError, TypeError, KeyError):  # none yet, or one this version cannot read
        return []


def load_entries(ws: Workspace, tier: str) -> tuple[list[AtlasEntry], float | None]:
    """The last atlas run of `tier` in the workspace, as atlas.json keeps it."""
    path = atlas_dir(ws, tier) / "atlas.json"
    if not path.exists():
        raise UnknownOption(f"no {tier} atlas in {ws.root}; run `deploytool atlas --tier {tier}` first")
    doc = json.loads(path.read_text())
    return [AtlasEntry(**e) for e in doc["entries"]], doc.get("seconds")
