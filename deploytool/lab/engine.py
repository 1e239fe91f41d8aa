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
from typing import Any, Iterator

from deploytool.errors import UnknownOption
from deploytool.provenance import host_name
from deploytool.targets import all_targets

NO_WORKER_TIMEOUT_S = 30.0  # a cell whose resource no worker has fails after this, instead of waiting forever


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
        with LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=None,
                          resources=resources if resources is not None else local_resources(),
                          name="embedded") as cluster, Client(cluster) as c:
            yield c


def run_worker(scheduler: str, name: str | None = None, browsers: int = 1, poll_s: float = 10.0) -> None:
    """`deploytool lab worker`: a Dask worker named after this host that advertises its resources and updates them
    when a phone is plugged in or unplugged. Runs until interrupted."""
    import asyncio

    from distributed import Worker

    async def main() -> None:
        current = local_resources(browsers)
        async with Worker(scheduler, name=name or host_name(), resources=current, nthreads=1) as w:
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
