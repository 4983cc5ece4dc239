"""``python -m experiments.cluster scheduler|worker``: the machines' side of a sweep on a cluster.

    python -m experiments.cluster scheduler [--host ADDR] [--port 8786] [--dashboard-port 8787]
                                            [--allowed-failures 2]
    python -m experiments.cluster worker tcp://HOST:PORT [--name NAME] [--host ADDR]
                                         [--port PORT]

``make cluster-scheduler`` starts the scheduler and prints its address (what ``CLUSTER=`` and
``SCHEDULER=`` take) and its dashboard's URL. ``make cluster-worker SCHEDULER=...`` starts a
worker on a machine after ``make setup`` there: as root (it brings fabrics up), one thread and
one ``fabric`` resource, so that it runs one emulation at a time; before it joins, it removes
what a run killed with an earlier worker left (:mod:`experiments.cluster.plugin`). A worker
runs the code of its own tree and refuses a seed from a client at another commit. The scheduler
imports no more of this project than this module and the packages' empty ``__init__``: the
worker's modules (the plugin, the task, the experiments and testbed) are imported by the
worker command alone.

Both run until interrupted (Ctrl-C, SIGTERM). A worker stopped mid-seed waits for the seed a
while (Dask's executor shutdown), then removes the fabric and processes of the runs this
process owns (the seed's thread would die with the interpreter without its teardown) before
it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Sequence

import dask
from distributed import Scheduler, Worker

#: How many workers may die running one task before the scheduler gives up on it
#: (``KilledWorker``): the bound on a seed's reruns.
ALLOWED_FAILURES = 2

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.cluster", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    scheduler = commands.add_parser("scheduler", help="start the scheduler")
    scheduler.add_argument("--host", default="", help="address to listen on (default: all)")
    scheduler.add_argument("--port", type=int, default=8786)
    scheduler.add_argument("--dashboard-port", type=int, default=8787)
    scheduler.add_argument(
        "--allowed-failures",
        type=int,
        default=ALLOWED_FAILURES,
        help="workers that may die running one seed before it is given up (default %(default)s)",
    )
    worker = commands.add_parser("worker", help="start a worker on this machine (root)")
    worker.add_argument("scheduler", help="the scheduler's address, tcp://HOST:PORT")
    worker.add_argument("--name", default=socket.gethostname(), help="default: host name")
    worker.add_argument("--host", default=None, help="address to listen on")
    worker.add_argument(
        "--port",
        type=int,
        default=None,
        help="port to listen on, for a firewall to let the client reach (default: any free)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if args.command == "scheduler":
        dask.config.set({"distributed.scheduler.allowed-failures": args.allowed_failures})
        return asyncio.run(_scheduler(args.host, args.port, args.dashboard_port))
    return asyncio.run(_worker(args.scheduler, args.name, args.host, args.port))


async def _scheduler(host: str, port: int, dashboard_port: int) -> int:
    async with Scheduler(
        host=host or None, port=port, dashboard_address=f":{dashboard_port}"
    ) as scheduler:
        dashboard = scheduler.services.get("dashboard")
        url = (
            f"http://{host or socket.gethostname()}:{dashboard.port}/status"
            if dashboard is not None
            else "none (bokeh is not installed)"
        )
        print(f"scheduler at {scheduler.address}; dashboard {url}", flush=True)
        await _until_stopped(scheduler.finished())
    return 0


async def _worker(address: str, name: str, host: str | None, port: int | None) -> int:
    # The task's modules (every experiment, the testbed) take seconds to import on a busy
    # machine: imported here, before the worker joins, they are not paid by its first seed.
    # The tree they were loaded from is taken now: a seed from a client at another tree,
    # or one reaching a worker whose tree changed since, is refused.
    from experiments.cluster.plugin import FabricCleanup
    from experiments.cluster.task import loaded_tree

    print(f"worker {name}: code of tree {loaded_tree()}", flush=True)

    async with Worker(
        address,
        name=name,
        host=host,
        port=port,
        nthreads=1,
        resources={"fabric": 1},
        plugins=(FabricCleanup(),),
    ) as worker:
        print(f"worker {name} at {worker.address}, joined {address}", flush=True)
        await _until_stopped(worker.finished())
    _sweep_own_runs(name)
    return 0


def _sweep_own_runs(name: str) -> None:
    """Remove the fabric of a seed still running when the worker closed: Dask stops waiting
    for its thread after a while, and the thread dies with the interpreter without its
    testbed's teardown, so the runs this process owns are swept here (``make stop``'s sweep)."""
    from testbed.mininet.cleanup import sweep_own_runs

    for prefix, left in sweep_own_runs().items():
        if left.empty:
            log.warning("worker %s: stopped mid-seed, removed its run %s", name, prefix)
        else:
            log.error("worker %s: run %s could not be removed: %s", name, prefix, left)


async def _until_stopped(finished: object) -> None:
    """Until the server ends or a SIGTERM or SIGINT comes (then the ``async with`` closes it)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    waiting = asyncio.ensure_future(finished)  # type: ignore[call-overload]
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    for task in (waiting, stopping):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


if __name__ == "__main__":
    sys.exit(main())
