"""The veth figure: both tools over one veth pair, lossless and lossy, in the counter-balanced
order, each run measured again while the hypervisor stole too much of its cores; each run is
told as it goes (:mod:`experiments.progress`, on standard error)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from experiments.progress import Progress, Step
from hostenv.netns import NetnsLab
from tools.bench_agent.figures import RunRecord, summarize
from tools.bench_agent.runs import iperf3_udp, mrc_perf
from tools.bench_agent.schedule import run_order
from tools.bench_progress import goodput, with_retries
from tools.cpu_accounting import STEAL_RETRIES, run_unstolen
from tools.netns_processes import SCHEDULING
from tools.veth_lab import make_veth_pair, route_peers_via_gateway
from tools.veth_loss import apply_loss, clear_loss, loss_method, random_loss_drops


def tool_names(args: argparse.Namespace) -> list[str]:
    """The tools measured: iperf3 and mrc-perf, and mrc-perf on one path if asked."""
    return ["iperf3_udp", "mrc_perf"] + (["mrc_perf_single_path"] if args.single_path else [])


def veth_steps(args: argparse.Namespace) -> list[Step]:
    """Every run of the figure in the order :func:`veth_benchmark` makes them, each
    ``--duration`` long, for the progress lines."""
    return [
        Step(f"{name} {phase} repeat {repeat}", args.duration)
        for repeat in range(args.repeat)
        for phase, tools in run_order(tool_names(args), repeat)
        for name in tools
    ]


def veth_benchmark(
    args: argparse.Namespace, progress: Progress, first_step: int = 0
) -> dict[str, Any]:
    """Both tools over one veth pair, lossless and lossy, alternating; the runs are steps
    ``first_step`` on of ``progress`` (:func:`veth_steps`)."""
    cores = _cores()
    sched = args.sched
    method = loss_method()
    result: dict[str, Any] = {
        "cores": {"sender": cores[0], "receiver": cores[1]},
        "scheduling": " ".join(SCHEDULING[sched]) or "normal",
        "duration_s": args.duration,
        "repeat": args.repeat,
        "loss_percent": args.loss,
        "loss_method": method,
        "peer_route": "direct" if args.direct_route else "via the peer as gateway (/32 onlink)",
    }
    names = tool_names(args)
    record = RunRecord(names)
    step = first_step
    with NetnsLab() as lab:
        pair = make_veth_pair(lab)
        if not args.direct_route:
            route_peers_via_gateway(pair)
        measures: dict[str, Callable[[], dict[str, Any]]] = {
            "iperf3_udp": lambda: iperf3_udp(pair, args.duration, cores, sched),
            "mrc_perf": lambda: mrc_perf(pair, args.duration, cores, sched, cc=args.cc),
            "mrc_perf_single_path": lambda: mrc_perf(
                pair, args.duration, cores, sched, evs=1, cc=args.cc
            ),
        }
        for repeat in range(args.repeat):
            record.orders.append(run_order(names, repeat))
            for phase, tools in record.orders[-1]:
                if phase == "lossy":
                    apply_loss(pair, args.loss, method)
                try:
                    for name in tools:
                        set_aside: list[dict[str, Any]] = []
                        progress.step_began(step)
                        kept = run_unstolen(
                            measures[name], args.steal_limit, STEAL_RETRIES, set_aside
                        )
                        progress.step_ended(step, with_retries(goodput(kept), set_aside))
                        step += 1
                        record.add(repeat, phase, name, kept, set_aside)
                finally:
                    if phase == "lossy":
                        if method == "nftables":
                            record.drops += random_loss_drops(pair.rx_ns)
                        clear_loss(pair, method)
    result.update(summarize(record, method == "nftables", args.steal_limit))
    return result


def _cores() -> tuple[int, int]:
    available = sorted(os.sched_getaffinity(0))
    return (available[0], available[1]) if len(available) > 1 else (available[0], available[0])
