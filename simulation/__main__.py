"""Command line: a workload on a topology's fabric in simulated time, its figures as JSON.

    python -m simulation permutation TOPO [--bytes 2M] [FABRIC OPTIONS]
    python -m simulation collective TOPO [--collective allreduce|allgather|reducescatter|alltoall]
        [--size 1M] [FABRIC OPTIONS]

    FABRIC OPTIONS: [--transport mrc|single|roce] [--roce-profile perftest|nccl|adaptive]
        [--qps N] [--routing static|reactive|converge:S] [--cut A B --cut-at S [--restore-at S]]
        [--loss P] [--seed N] [--limit S] [--no-check]

TOPO is a preset or a topology file (``python -m topologies.generate fat-tree --k 16 -o f.yaml``
makes a 1024-host one). The JSON says how many flows completed and were exact, their
completion times, the fabric's counters and what the simulation cost (wall time, events per
second, peak memory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from agent.cli.common import parse_size, positive_float
from agent.core.config import MrcConfig
from agent.io.errors import UsageError
from agent.io.transport import (
    RoceSetup,
    check_transport_options,
    mrc_config_for,
    roce_setup_for,
    transport_named,
    transport_names,
)
from agent.roce.profiles import profile_names
from collective.plans import Collective, check_size, parse_collective
from controller.intent.policy import RoutingPolicy
from simulation.collective import CollectiveResult, run_collective
from simulation.fabric import SimFabric
from simulation.links import link_config
from simulation.permutation import PermutationResult, run_permutation
from simulation.run import RunCost
from topologies import TopologyError, load_topology
from topologies.link_lookup import LinkNotFound, find_link
from topologies.model import Topology


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        topology = load_topology(args.topology)
        policy = RoutingPolicy.parse(args.routing)
        transport = transport_named(args.transport)
        check_transport_options(transport, roce_profile=args.roce_profile, qps=args.qps)
        roce: RoceSetup | None = None
        if transport.is_roce:
            roce = roce_setup_for(
                topology.settings.dscp,
                profile=args.roce_profile,
                qps=args.qps,
                line_rate=host_line_rate(topology),
            )
        cut = find_link(topology, *args.cut) if args.cut else None
        if args.command == "collective":
            collective = parse_collective(args.collective)
            check_size(args.size, len(topology.hosts))
    except (TopologyError, ValueError, LinkNotFound, UsageError) as error:
        print(f"simulation: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    config = mrc_config_for(transport, MrcConfig(dscp=topology.settings.dscp))
    fabric = SimFabric(
        topology, config=config, roce=roce, policy=policy, seed=args.seed, loss=args.loss
    )
    built = time.perf_counter() - started
    if cut is not None:
        fabric.fail_at(args.cut_at, cut.id)
        if args.restore_at is not None:
            fabric.restore_at(args.restore_at, cut.id)
    report: dict[str, Any]
    if args.command == "collective":
        outcome = run_collective(
            fabric, collective, args.size, limit_s=args.limit, check=not args.no_check
        )
        report = _collective_report(outcome, built)
        ok = outcome.completed_s is not None and not outcome.wrong_ranks
    else:
        result = run_permutation(
            fabric, args.bytes, seed=args.seed, limit_s=args.limit, check=not args.no_check
        )
        report = _report(result, built)
        complete = result.completed == len(result.flows)
        ok = complete and all(flow.exact is not False for flow in result.flows)
    report.update(
        topology=topology.name,
        switches=len(topology.switches),
        transport=transport.name,
        roce_profile=None if roce is None else roce.profile,
        qps=None if roce is None else roce.qps,
        routing=str(policy),
        cut=None if cut is None else str(cut.id),
        cut_at_s=None if cut is None else args.cut_at,
        seed=args.seed,
    )
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0 if ok else 5


def host_line_rate(topology: Topology) -> float:
    """A host port's rate in bits/s, as its simulated link serialises (the first host's first
    NIC; RoCE's DCQCN is scaled to it as the testbed scales it to the NIC's)."""
    host = topology.hosts[0]
    rate = link_config(host.nics[0].params, topology.settings).rate
    assert rate is not None  # a topology link always has a rate
    return rate * 8


def _report(result: PermutationResult, built_s: float) -> dict[str, Any]:
    times = sorted(flow.completed_s for flow in result.flows if flow.completed_s is not None)
    failed = [flow.failed for flow in result.flows if flow.failed is not None]
    return {
        "hosts": result.hosts,
        "flow_bytes": result.flow_bytes,
        "flows": len(result.flows),
        "completed": result.completed,
        "exact": sum(flow.exact is True for flow in result.flows),
        "failed": failed,
        "completion_ms": {
            "median": _ms(statistics.median(times)) if times else None,
            "p99": _ms(times[min(len(times) - 1, int(0.99 * len(times)))]) if times else None,
            "max": _ms(times[-1]) if times else None,
        },
        "finished_ms": None if result.finished_s is None else _ms(result.finished_s),
        **_cost_report(result.cost, built_s),
    }


def _collective_report(result: CollectiveResult, built_s: float) -> dict[str, Any]:
    algbw, busbw = result.algbw, result.busbw
    return {
        "collective": result.collective.value,
        "ranks": result.ranks,
        "size": result.size,
        "completed_ms": None if result.completed_s is None else _ms(result.completed_s),
        "failed": result.failed,
        "wrong_ranks": result.wrong_ranks,
        "algbw_mb_s": None if algbw is None else round(algbw / 1e6, 3),
        "busbw_mb_s": None if busbw is None else round(busbw / 1e6, 3),
        **_cost_report(result.cost, built_s),
    }


def _cost_report(cost: RunCost, built_s: float) -> dict[str, Any]:
    """The fabric's counters and what the run cost, as both workloads report them."""
    return {
        "fabric": asdict(cost.stats),
        "cost": {
            "build_s": round(built_s, 2),
            "wall_s": round(cost.wall_s, 2),
            "cpu_s": round(cost.cpu_s, 2),
            "events": cost.stats.events,
            "events_per_cpu_s": round(cost.events_per_cpu_s),
            "max_rss_mb": round(cost.max_rss_mb),
        },
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simulation", description=(__doc__ or "").split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    perm = commands.add_parser("permutation", help="every host writes one message to another")
    perm.add_argument("topology", help="a preset or a topology file")
    perm.add_argument("--bytes", type=parse_size, default=2 << 20, help="per flow (2M)")
    _fabric_options(perm)
    coll = commands.add_parser("collective", help="one iteration of a collective, a rank a host")
    coll.add_argument("topology", help="a preset or a topology file")
    coll.add_argument("--collective", default="allreduce", choices=[c.value for c in Collective])
    coll.add_argument("--size", type=parse_size, default=1 << 20, help="the buffer (1M)")
    _fabric_options(coll)
    return parser


def _fabric_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", default="mrc", choices=transport_names())
    parser.add_argument("--roce-profile", choices=profile_names(), help="with --transport roce")
    parser.add_argument("--qps", type=int, help="RoCE QPs a flow is striped over (the profile's)")
    parser.add_argument("--routing", default="reactive", help="static, reactive, converge:S")
    parser.add_argument("--cut", nargs=2, metavar=("A", "B"), help="a link to cut (node[:port])")
    parser.add_argument("--cut-at", type=positive_float, default=0.001, help="seconds (0.001)")
    parser.add_argument("--restore-at", type=positive_float, help="seconds")
    parser.add_argument("--loss", type=float, default=0.0, help="random loss on every link")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=positive_float, default=30.0, help="simulated seconds")
    parser.add_argument("--no-check", action="store_true", help="skip comparing the bytes")


if __name__ == "__main__":
    sys.exit(main())
