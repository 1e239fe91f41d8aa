"""Several real processes writing to one results store at once, for the
concurrency tests of `deploytool.store` (SQLite file and PostgreSQL server).

`python -m tests.store_hammer URL START_AT WRITER N_KEYS N_SAVES` imports
everything first, waits until the wall clock reaches START_AT (so every writer
opens the store, and so creates the schema, at the same moment), starts the
shared run "hammer", then saves N_SAVES results cycling over N_KEYS keys that
every writer shares. It prints one JSON line: its last write per key, which is
what "last write wins" is checked against. Any exception ends it non-zero.
"""

from __future__ import annotations

import json
import sys
import time

from tests import results as factory
from deploytool.result import Combo, Result
from deploytool.store import SqlAlchemyStore, open_store

RUN_ID = "hammer"


def result(key: str, writer: int, seq: int) -> Result:
    return factory.result(RUN_ID, key, combo=Combo("keras", "tflite", "none", "host"),
                          comparison=factory.comparison(accuracy=writer + seq / 1e6),
                          environment={"writer": writer, "seq": seq})


def main(url: str, start_at: float, writer: int, n_keys: int, n_saves: int) -> None:
    time.sleep(max(0.0, start_at - time.time()))
    store = open_store(url, url)  # what the tool opens: the standard library's SQLite store, or SQLAlchemy's
    store.start_run(RUN_ID, "m", {"writer": writer})
    last: dict[str, list[int]] = {}
    for seq in range(n_saves):
        key = f"k{(seq + writer) % n_keys}"  # writers start on different keys, then collide all the time
        store.save(result(key, writer, seq))
        last[key] = [writer, seq]
    store.start_run(RUN_ID, "m", {"writer": writer})  # a second start of the same run, racing the others' saves
    print(json.dumps(last))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))


def hammer(url: str, writers: int, n_keys: int, n_saves: int, timeout: float = 300) -> list[dict[str, list[int]]]:
    """Run `writers` hammer processes against `url` at once; returns each one's last write per key.
    Fails (AssertionError with the writer's stderr) when any writer raised."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    start_at = time.time() + 4.0  # after every writer has imported SQLAlchemy and its driver
    procs = [subprocess.Popen([sys.executable, "-m", "tests.store_hammer", url, str(start_at), str(w), str(n_keys),
                               str(n_saves)], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for w in range(writers)]
    outs = [p.communicate(timeout=timeout) for p in procs]
    failed = [f"writer {w} exit {p.returncode}: " + " | ".join(_exception_lines(err)) for w, (p, (_, err)) in
              enumerate(zip(procs, outs)) if p.returncode]
    assert not failed, "\n".join(failed)
    return [json.loads(out) for out, _ in outs]


def _exception_lines(stderr: str) -> list[str]:
    """The `module.SomeError: message` lines of a traceback, without the SQL and parameters around them."""
    import re

    return [ln[:300] for ln in stderr.splitlines() if re.match(r"[\w.]+(Error|Exception|Violation|Truncation)\b", ln)]


def check_last_write_wins(store: SqlAlchemyStore, lasts: list[dict[str, list[int]]], n_keys: int) -> None:
    """One row per key, none lost or doubled, and each row is some writer's *last* write to that key,
    whole (its metric column and its JSON details come from the same write)."""
    rows = store.results_for(RUN_ID)
    assert sorted(r.combo_key for r in rows) == sorted(f"k{i}" for i in range(n_keys))
    for r in rows:
        writer, seq = r.environment["writer"], r.environment["seq"]
        assert lasts[writer][r.combo_key] == [writer, seq], f"{r.combo_key}: an overwritten write of writer {writer}"
        assert r.metrics["accuracy"] == writer + seq / 1e6
    with store.engine.connect() as c:
        n = c.execute(store.sa.text("select count(*) from results where run_id = :r"), {"r": RUN_ID}).scalar()
        runs = c.execute(store.sa.text("select status from runs where run_id = :r"), {"r": RUN_ID}).all()
        column = dict(c.execute(store.sa.text("select combo_key, accuracy from results where run_id = :r"),
                                {"r": RUN_ID}).all())
    assert n == n_keys and [tuple(x) for x in runs] == [("running",)]
    assert column == {r.combo_key: r.metrics["accuracy"] for r in rows}
