"""`deploytool atlas`: real architectures at their real size (or the quick tier's reduced one), each migrated on
every route and quantization on the targets asked for, drawn as one grid (atlas.html); `--list` names them,
`--page` draws the grid again from the store."""

from __future__ import annotations

import argparse

from deploytool.atlas import ATLAS
from deploytool.atlas.grid import counts
from deploytool.atlas.page import build_grid, write_page
from deploytool.atlas.runner import AtlasRequest, load_entries, run_atlas, select
from deploytool.commands.common import print_table
from deploytool.store import open_store
from deploytool.targets import target_flags
from deploytool.workspace import Workspace


def run(args: argparse.Namespace) -> int:
    if args.list:
        listing = []
        for name in select(tuple(args.arch or ())):
            a = ATLAS[name]
            listing.append((name, a.family, a.input_kind, _size(a.quick.params, a.quick.input_shape),
                         _size(a.full.params, a.full.input_shape), a.test_set))
        print_table(("architecture", "family", "input", "quick", "full", "test set"), listing)
        return 0
    if args.page:
        ws = Workspace.open(args.workspace)
        entries, seconds = load_entries(ws, args.tier)
        print(f"atlas: {write_page(ws, args.db, args.tier, entries, seconds)}")
        return 0
    req = AtlasRequest(tier=args.tier, architectures=tuple(args.arch or ()), targets=(args.target,),
                       formats=(args.format,), quantize=(args.quantize,),
                       target_options={t.name: o for t in target_flags() if (o := t.options_from_cli(args))},
                       latency_samples=args.latency_samples, warmup_runs=args.warmup, timeout_s=args.timeout,
                       fresh=args.fresh)
    out = run_atlas(req, args.workspace, args.db, progress=not args.quiet)
    ws = Workspace.open(args.workspace)
    rows, _, _ = build_grid(ws, open_store(args.db, ws.default_db_url), args.tier, out.entries)
    tally = counts(rows)
    print(f"atlas ({args.tier}): {len(out.entries)} architectures in {out.seconds / 60:.1f} min; "
          + ", ".join(f"{v} {k}" for k, v in tally.items() if v))
    print(f"atlas: {out.page}")
    return 0


def _size(params: dict, shape: tuple[int, ...]) -> str:
    shown = {k: v for k, v in params.items() if k != "classes"}
    return "x".join(map(str, shape)) + (" " + " ".join(f"{k}={v}" for k, v in shown.items()) if shown else "")
