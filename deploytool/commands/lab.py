"""`deploytool lab [run|worker|history]`: nights of a device lab on Dask."""

from __future__ import annotations

import argparse
import csv
import json
import sys

from deploytool.commands.common import print_table
from deploytool.errors import UnknownOption
from deploytool.lab.engine import run_worker
from deploytool.lab.labfile import load_lab
from deploytool.lab.night import run_night
from deploytool.store import open_store
from deploytool.workspace import Workspace


def run(args: argparse.Namespace) -> int:
    if args.action == "worker":
        if not args.scheduler:
            raise UnknownOption("`lab worker` needs --scheduler tcp://HOST:8786 (start one with `dask scheduler`)")
        run_worker(args.scheduler, args.name, connect_timeout_s=None if args.retry else args.connect_timeout)
        return 0
    ws = Workspace.open(args.workspace, writable=args.action == "run")
    store = open_store(args.db, ws.default_db_url)
    if args.action == "history":
        nights = [r for r in store.list_runs(limit=1000) if r.model.startswith("lab:")]
        rows = []
        for n in nights:
            summary_file = ws.root / "reports" / n.run_id / "lab.json"
            summary = json.loads(summary_file.read_text())["summary"] if summary_file.exists() else {}
            rows.append({"night": n.request.get("night"), "lab": n.model[4:], "run": n.run_id,
                         "status": n.status, "created": n.created_at, **summary})
        if args.output == "json":
            print(json.dumps(rows, indent=1, default=str))
        elif args.output == "csv":
            _write_csv(rows)
        else:
            print_table(("night", "lab", "status", "cells", "alerts", "failing", "created"),
                         [(str(r["night"]), r["lab"], r["status"], str(r.get("cells", "-")), str(r.get("alerts", "-")),
                           str(r.get("failing", "-")), r["created"]) for r in rows])
        return 0
    if args.lab is None:
        raise UnknownOption("`lab run` needs a lab file, e.g. `deploytool lab run examples/lab.toml`")

    lab = load_lab(args.lab)
    out = run_night(lab, ws, store, args.night, args.scheduler, progress=not args.quiet,
                    no_worker_timeout_s=args.no_worker_timeout)
    for j in out.judged:
        r = j.result
        flag = "ALERT " if j.alert else "      "
        what = "; ".join(f"{c.metric} {c.outcome}" for c in j.changes if c.outcome != "same")
        print(f"{flag}{r.lab.label or r.combo.label} [{r.lab.host}]: "
              f"{r.outcome}" + (f" ({what})" if what else ""))
    print(f"lab report: {out.paths.html}")
    print(f"night {out.night}: {len(out.judged)} cells, {len(out.alerts)} alert(s)")
    return 1 if out.alerts else 0


def _write_csv(rows: list[dict]) -> None:
    """`lab history --format csv`: one line per night; the summary's counts are columns (a nested value: JSON)."""
    columns = list(dict.fromkeys(k for r in rows for k in r)) or ["night", "lab", "run", "status", "created"]
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
