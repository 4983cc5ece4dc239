"""``python -m tools.bench_agent`` (``make bench-agent``): the flags, and the report as JSON on
stdout and in ``--out``; each measurement told as it goes on stderr
(:mod:`experiments.progress`)."""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

from agent.core.crc import IMPLEMENTATION as crc_implementation
from agent.native import running_build
from experiments.progress import Display, Step, track
from hostenv.netns import terminate_on_signals
from tools import bench_agent
from tools.bench_agent.runs import core_benchmark
from tools.bench_agent.veth import veth_benchmark, veth_steps
from tools.cpu_accounting import STEAL_LIMIT
from tools.netns_processes import SCHEDULING
from tools.veth_lab import veth_skip_reason


def write_report(report: dict[str, Any], out: Path | None) -> None:
    """The report as indented JSON on stdout, and into ``out`` when one was named."""
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        out.write_text(text + "\n")


def core_figure(core: dict[str, Any]) -> str:
    """The core figure's rate, for its progress line."""
    rate = core.get("packets_per_second")
    return "done" if rate is None else f"{float(rate):.0f} datagrams/s"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    description = (bench_agent.__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="bench_agent", description=description)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    # Three: a single 5 s run on a shared VM moves by +-20 % within minutes, and one pair of
    # runs decided a retention figure on its own.
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median kept)")
    parser.add_argument("--loss", type=float, default=1.0, help="percent loss, lossy phase")
    parser.add_argument("--cc", default=None, help="congestion control of mrc-perf")
    parser.add_argument("--single-path", action="store_true", help="also measure mrc-perf --evs 1")
    parser.add_argument(
        "--direct-route", action="store_true", help="no /32 gateway route to the peer"
    )
    parser.add_argument(
        "--sched",
        choices=sorted(SCHEDULING),
        default="nice",
        help="how both tools run on their cores: nice -20 (default), SCHED_FIFO, or as is",
    )
    parser.add_argument(
        "--steal-limit",
        type=float,
        default=STEAL_LIMIT,
        help="measure a run again (twice at most) if the hypervisor took more than this share "
        "of either core during it (1 turns it off)",
    )
    parser.add_argument("--core-messages", type=int, default=200, help="messages, core figure")
    parser.add_argument("--skip-veth", action="store_true", help="only the core figure")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.repeat < 1 or not 0 < args.loss <= 100:
        parser.error("need --duration > 0, --repeat >= 1 and 0 < --loss <= 100")
    if not 0 < args.steal_limit <= 1:
        parser.error("need 0 < --steal-limit <= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict[str, Any] = {
        "benchmark": "bench-agent",
        "host": {
            "kernel": platform.release(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "icrc_crc32": crc_implementation,
            # mypyc-compiled or pure Python (agent/native.py); mrc-perf runs the same build.
            "agent_build": running_build(),
        },
    }
    skip = "--skip-veth" if args.skip_veth else veth_skip_reason()
    steps = [Step(f"core, {args.core_messages} messages")]
    steps += veth_steps(args) if skip is None else []
    with track(Display(), "bench-agent", steps, unit="measurements") as progress:
        progress.step_began(0)
        report["core"] = core_benchmark(args.core_messages)
        progress.step_ended(0, core_figure(report["core"]))
        if skip is not None:
            report["veth"] = {"skipped": skip}
        else:
            with terminate_on_signals():
                report["veth"] = veth_benchmark(args, progress, first_step=1)
    write_report(report, args.out)
    return 0
