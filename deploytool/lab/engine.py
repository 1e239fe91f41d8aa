"""The lab's engine is Dask distributed; this module only sets it up. A worker
advertises its host's resources, each target's own (`Target.local_resources`:
`host`, `chromium` when found, one `android-<serial>` per ready phone), tells
what it knows of them when a night
is planned (a phone's model and ABI, for the lab's device selectors), and a cell
asks for the resource of its target, so it runs on the worker that owns its
phone or browser. No scheduler is written here: retries, dead workers and "no
worker has it" are Dask's."""

from __future__ import annotations

import contextlib
import os
from urllib.parse import urlsplit
from typing import Any, Iterator

from deploytool.errors import UnknownOption
from deploytool.provenance import host_name
from deploytool.targets import all_targets

CONNECT_TIMEOUT_S = 30.0  # `lab worker` gives up on a scheduler it cannot reach after this (unless --retry)
SCHEMES = ("tcp", "tls")
_HOW = "give the scheduler as tcp://HOST:PORT (e.g. tcp://lab1:8786, tcp://[::1]:8786)"
NO_WORKER_TIMEOUT_S = 30.0  # a cell whose resource no worker has fails after this, instead of waiting forever


def check_scheduler_address(address: str) -> str:
    """`address` as Dask expects it (tcp://HOST:PORT; a bare HOST:PORT means tcp), or one line saying what is
    wrong with it: checked here because Dask answers a malformed address with a traceback."""
    text = address.strip()
    if "://" not in text:
        text = f"tcp://{text}"
    try:
        parts = urlsplit(text)
        port = parts.port
        host = parts.hostname
    except ValueError as e:
        raise UnknownOption(f"--scheduler {address!r} is not an address ({e}); {_HOW}") from None
    if parts.scheme not in SCHEMES:
        raise UnknownOption(f"--scheduler {address!r}: unknown scheme {parts.scheme!r} (Dask speaks "
                            f"{', '.join(SCHEMES)}); {_HOW}")
    if not host or port is None or not 0 < port < 65536 or parts.path not in ("", "/") or parts.query:
        raise UnknownOption(f"--scheduler {address!r} needs a host and a port 1-65535; {_HOW}")
    return f"{parts.scheme}://{parts.netloc}"


def local_resources(browsers: int = 1) -> dict[str, float]:
    """What this machine can run: every target's resources here (`Target.local_resources`), e.g. always `host`;
    `chromium` (as many at once as `browsers`) when Chromium and the web harness are installed; `android-<serial>`
    for each ready phone."""
    res: dict[str, float] = {}
    for t in all_targets():
        res.update(t.local_resources(browsers))
    return res


def _facts(owned: set[str]) -> dict[str, dict[str, str]]:
    facts: dict[str, dict[str, str]] = {}
    for t in all_targets():
        facts.update(t.resource_facts(owned))
    return facts


async def _worker_facts(dask_worker: Any = None) -> dict[str, dict[str, str]]:
    """On a worker: each target's facts about the resources this worker owns now. Asking a phone takes a moment:
    in a thread, not on the worker's event loop (its heartbeats go on)."""
    import asyncio

    owned = {r for r, n in dask_worker.state.total_resources.items() if n > 0}
    return await asyncio.to_thread(_facts, owned)


def cluster_resources(c: Any) -> dict[str, dict[str, str]]:
    """Every resource some worker of the cluster owns, with the facts its worker told (`Target.resource_facts`;
    {} when it told none). Asked of the workers with `client.run`, so the embedded LocalCluster, `deploytool lab
    worker` and a plain `dask worker` all answer, with what is plugged in now."""
    out: dict[str, dict[str, str]] = {r: {} for w in c.scheduler_info(n_workers=-1)["workers"].values()
                                      for r, n in (w.get("resources") or {}).items() if n > 0}
    for told in c.run(_worker_facts, on_error="return").values():
        if isinstance(told, dict):  # a worker that failed to answer leaves its resources without facts
            for r, facts in told.items():
                out[r] = {**out.get(r, {}), **facts}
    return out


def cluster_cpus(c: Any) -> int | None:
    """The most CPUs any worker of the cluster has (None when no worker answers): a cell asking for more
    threads than that can run nowhere."""
    told = [n for n in c.run(os.cpu_count, on_error="return").values() if isinstance(n, int)]
    return max(told) if told else None


def _config(no_worker_timeout_s: float) -> Any:
    import dask

    # One retry is ours (submit(retries=1)); a cell whose worker died twice is `worker_lost`.
    return dask.config.set({"distributed.scheduler.no-workers-timeout": f"{no_worker_timeout_s}s",
                            "distributed.scheduler.allowed-failures": 1,
                            "distributed.worker.daemon": False,
                            "distributed.admin.tick.limit": "1h"})


def _bound_scheduler(no_worker_timeout_s: float, dask_scheduler: Any = None) -> None:
    dask_scheduler.no_workers_timeout = no_worker_timeout_s
    dask_scheduler.allowed_failures = 1


@contextlib.contextmanager
def client(scheduler: str | None = None, resources: dict[str, float] | None = None,
           no_worker_timeout_s: float = NO_WORKER_TIMEOUT_S) -> Iterator[Any]:
    """A Dask client: to `scheduler` (tcp://HOST:8786), or to an embedded LocalCluster with this machine's resources.
    The embedded worker runs in this process, one cell at a time (cells share the 2 cores badly)."""
    from distributed import Client, LocalCluster

    with _config(no_worker_timeout_s):
        if scheduler:
            scheduler = check_scheduler_address(scheduler)
            try:
                c = Client(scheduler, timeout=10)
            except (OSError, TimeoutError) as e:
                raise UnknownOption(f"cannot reach the Dask scheduler at {scheduler} ({type(e).__name__}); start it "
                                    "with `dask scheduler` and workers with `deploytool lab worker`") from None
            with c:
                # a plain `dask scheduler` waits forever for a resource no worker has, and retries a cell whose
                # worker died three times: the night's bounds are set on it (they last until it restarts)
                c.run_on_scheduler(_bound_scheduler, no_worker_timeout_s)
                yield c
            return
        import logging

        # the embedded worker's cells cancelled by Ctrl-C are not news: the night says it was interrupted
        logging.getLogger("distributed.worker").setLevel(logging.ERROR)
        # no dashboard; the scheduler's own HTTP routes (it always serves some) on a free port of 127.0.0.1, not
        # on every interface at 8787, where two labs running at once would collide (and Dask say so on stderr)
        with LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None,
                          scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                          resources=resources if resources is not None else local_resources(),
                          name="embedded") as cluster, Client(cluster) as c:
            yield c


def run_worker(scheduler: str, name: str | None = None, browsers: int = 1, poll_s: float = 10.0,
               connect_timeout_s: float | None = CONNECT_TIMEOUT_S) -> None:
    """`deploytool lab worker`: a Dask worker named after this host that advertises its resources and updates them
    when a phone is plugged in or unplugged. Runs until interrupted. A scheduler it cannot reach within
    `connect_timeout_s` is one line (exit 2); `None` waits for it as long as it takes, like a service."""
    import asyncio
    import logging

    from distributed import Worker

    address = check_scheduler_address(scheduler)
    # Dask's start-up banner and reconnection chatter are not the user's business: this command prints what
    # the worker is and what it owns, and one line when it cannot reach the scheduler.
    logging.getLogger("distributed").setLevel(logging.WARNING)

    async def main() -> None:
        current = local_resources(browsers)
        worker = Worker(address, name=name or host_name(), resources=current, nthreads=1,
                        death_timeout=connect_timeout_s, dashboard=False)
        try:
            await worker
        except (OSError, TimeoutError, asyncio.TimeoutError, RuntimeError) as e:
            await worker.close(timeout=5)
            raise UnknownOption(f"cannot reach the Dask scheduler at {address} within {connect_timeout_s:g} s "
                                f"({type(e).__name__}); start it with `dask scheduler`, check the address, or pass "
                                "--retry to keep trying") from None
        async with worker as w:
            print(f"lab worker {w.name} at {w.address}: {current}", flush=True)
            while w.status.name not in ("closed", "closing", "failed"):
                await asyncio.sleep(poll_s)
                now = local_resources(browsers)
                if now != current:
                    await w.set_resources(**{k: now.get(k, 0) for k in set(now) | set(current)})
                    current = now
                    print(f"lab worker {w.name}: resources now {current}", flush=True)

    with _config(NO_WORKER_TIMEOUT_S):
        asyncio.run(main())
