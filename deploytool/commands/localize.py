"""`deploytool localize RUN [ROW]`: where a stored failing row's error starts."""

from __future__ import annotations

import argparse

from deploytool.errors import UnknownOption
from deploytool.localize import localize_run
from deploytool.store import open_store
from deploytool.workspace import Workspace


def run(args: argparse.Namespace) -> int:
    ws = Workspace.open(args.workspace)
    store = open_store(args.db, ws.default_db_url)
    run = store.get_run(args.run)
    if run is None:
        raise UnknownOption(f"no stored run {args.run!r}; `deploytool report --list` shows the runs")
    for result, _ in localize_run(run, store, ws, args.row):
        if result.bundle:
            print(f"bundle: {result.bundle}")
    return 0
