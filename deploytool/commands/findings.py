"""`deploytool findings [list|show|export]`: the converter and runtime bugs the runs found, with their triage
class and state (confirmed by a bare reproducer, candidate, coverage gap, unconfirmed), filtered on either."""

from __future__ import annotations

import argparse
import json

from deploytool.bugs.findings import export_finding
from deploytool.bugs.upstream import write_finding
from deploytool.commands.common import print_table
from deploytool.errors import UnknownOption
from deploytool.store import open_store
from deploytool.workspace import Workspace


def run(args: argparse.Namespace) -> int:
    ws = Workspace.open(args.workspace, writable=args.action == "export")
    store = open_store(args.db, ws.default_db_url)
    if args.action == "list":
        found = [f for f in store.findings() if (args.klass is None or f.klass == args.klass)
                 and (args.state is None or f.state == args.state.replace("-", " "))]
        if args.output == "json":
            print(json.dumps([{**f.to_json(), "class": f.klass, "state": f.state} for f in found], indent=1,
                             default=str))
            return 0
        print_table(("finding", "class", "state", "owner", "seen", "last seen", "since", "title"),
                     [(f.id[:10], f.klass or "-", f.state, f.owner or "-", str(f.occurrences), f.last_seen[:16],
                       f"not seen since {f.not_seen_since}" if f.not_seen_since else "open",
                       f.title[:80]) for f in found])
        return 0
    if not args.id:
        raise UnknownOption(f"`findings {args.action}` needs a finding id; `deploytool findings` lists them")
    f = store.get_finding(args.id)
    if f is None:
        raise UnknownOption(f"no single finding matches {args.id!r}; `deploytool findings` lists them")
    folder = ws.root / "findings" / f.id
    if args.action == "show":
        if args.output == "json":
            print(json.dumps(f.to_json(), indent=1, default=str))
        else:  # the issue when it is confirmed, else what deploytool concluded
            shown = next((p for p in (folder / "issue.md", folder / "finding.md") if p.exists()), None)
            print(shown.read_text() if shown is not None else json.dumps(f.to_json(), indent=1, default=str))
        return 0
    if args.dir is None:
        raise UnknownOption("`findings export ID DIR` needs the folder to write into")
    if not folder.is_dir():
        write_finding(f, ws.finding_dir(f.id), ws.blob_dir())
    dest = export_finding(folder, args.dir)
    print(json.dumps({"finding": f.id, "exported": str(dest)}) if args.output == "json" else f"exported to {dest}")
    return 0
