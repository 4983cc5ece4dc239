"""`make bench-api`: RDMA WRITEs through the host API against ``mrc-perf`` on the same veth pair.

What is compared, at each message size (``--sizes``, 64 KiB among the defaults):

- **api**: ``examples/api/benchmark.py`` (OCP's benchmark application on ``agent.api``): a
  client keeps ``--tx-depth`` WRITEs in flight through its host's ``mrc-agent serve`` for
  ``--duration`` seconds, then a WRITE with immediate that the server's completion channel
  wakes it for; the server checks the last message's bytes. Goodput is the bytes of the
  WRITEs the responder acknowledged (a WRITE completes once acknowledged) over the time from
  the first post to the last completion;
- **mrc_perf**: ``mrc-perf --no-agent --message-size SIZE`` for as long, its own endpoint in the
  process: the agent's protocol with no control socket, JSON lines or second process between
  the application and the packets. Goodput is the bytes the receiver confirmed.

Both run over one veth pair between two namespaces (offloads off, peers reached through a /32
gateway route as in ``make bench-agent``), each side's processes pinned to one core (sender's
to the first, receiver's to the second: with the API, the application and its agent share
their side's core) at nice -20. The agents are started for each API run and stopped after it,
since ``mrc-perf --no-agent`` needs UDP 4791 for itself. The runs are counter-balanced
(``tools.counterbalance``): within a repeat the sizes alternate which side goes first (A B,
B A, ...), and each size swaps its order from one repeat to the next, so a drift of the
machine's speed weighs on both sides of every ratio alike. A run whose cores the hypervisor
took more than ``--steal-limit`` of is measured again (``tools.cpu_accounting.run_unstolen``).

JSON on stdout (and ``--out FILE``): per size each side's messages/s and goodput (median and
spread over the repeats, every run), the repeats' paired ratios api / mrc_perf, the order the
runs were made in, and the target: at 64 KiB the API reaches at least 0.8 of ``mrc-perf``'s
goodput (the median of the paired ratios; reported as measured either way). Each run is told
as it goes on stderr, with its goodput and messages/s (:mod:`experiments.progress`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.native import running_build
from experiments.progress import Display, Progress, Step, track
from hostenv.netns import NetnsLab, terminate_on_signals
from hostenv.proc_stat import read_proc_stat
from tools.bench_agent.cli import write_report
from tools.bench_progress import goodput, with_retries
from tools.counterbalance import ordered, paired_summary, spread
from tools.cpu_accounting import STEAL_LIMIT, STEAL_RETRIES, pinned_cores_busy, run_unstolen
from tools.netns_processes import REPO, SCHEDULING, Background, pinned, run_client
from tools.veth_lab import VethPair, make_veth_pair, route_peers_via_gateway, veth_skip_reason

SIDES = ("api", "mrc_perf")
DEFAULT_SIZES = (4096, 16384, 65536, 262144)
#: The size the target is set at, and the target: API goodput / mrc-perf goodput.
TARGET_SIZE = 65536
TARGET_RATIO = 0.8
AGENT = [sys.executable, "-m", "agent.cli.agent_main"]
PERF = [sys.executable, "-m", "agent.cli.perf_main"]
BENCHMARK = [sys.executable, str(REPO / "examples" / "api" / "benchmark.py")]
#: What ``mrc-agent serve`` prints once it owns UDP 4791 and its control socket.
AGENT_READY = "mrc-agent: ready"
#: The benchmark example's out-of-band exchange port (its default).
EXCHANGE_PORT = 18516


def run_order(sizes: Sequence[int], repeat: int) -> list[tuple[int, list[str]]]:
    """The runs of repeat ``repeat`` (from 0), in the order they are made: each size with its
    sides in order. Consecutive sizes swap which side goes first, and every size swaps its own
    order from one repeat to the next, so each size has each side first in half the repeats
    and adjacent runs pair up A B B A."""
    return [(size, ordered(SIDES, repeat + index)) for index, size in enumerate(sizes)]


def api_run(
    pair: VethPair,
    size: int,
    seconds: float,
    cores: tuple[int, int],
    sched: str,
    workdir: Path,
    tx_depth: int,
) -> dict[str, Any]:
    """One API run at ``size``: agents up on both sides, the benchmark example's server and
    client through them, agents down. Raises ``RuntimeError`` if the server's check fails."""
    sockets = {side: str(workdir / f"{side}.sock") for side in ("tx", "rx")}
    sizes = ["--min-size", str(size), "--size", str(size), "--duration", f"{seconds:g}"]
    options = [*sizes, "--tx-depth", str(tx_depth), "--cq-mod", str(tx_depth // 2)]
    options += ["--json", "--port", str(EXCHANGE_PORT)]
    rx_agent = pinned(
        [*AGENT, "serve", "--plane", pair.rx_ip, "--socket", sockets["rx"]], cores[1], sched
    )
    tx_agent = pinned(
        [*AGENT, "serve", "--plane", pair.tx_ip, "--socket", sockets["tx"]], cores[0], sched
    )
    server_command = pinned([*BENCHMARK, *options, "--socket", sockets["rx"]], cores[1], sched)
    client_command = pinned(
        [*BENCHMARK, pair.rx_ip, *options, "--socket", sockets["tx"]], cores[0], sched
    )
    with (
        Background(pair.rx_ns, rx_agent) as receiver_agent,
        Background(pair.tx_ns, tx_agent) as sender_agent,
    ):
        receiver_agent.wait_ready(AGENT_READY)
        sender_agent.wait_ready(AGENT_READY)
        with Background(pair.rx_ns, server_command) as server:
            cpu_before = read_proc_stat()
            output = run_client(pair.tx_ns, client_command, timeout=seconds + 120)
            cpu = pinned_cores_busy(cpu_before, cores)
            out, err = server.proc.communicate(timeout=60)
            if server.proc.returncode != 0:
                raise RuntimeError(f"the API benchmark's server failed: {err.decode()[-500:]}")
    checks = json.loads(out.decode())["server"]
    if not all(entry["ok"] for entry in checks):
        raise RuntimeError(f"the server's data check failed: {checks}")
    result = json.loads(output.strip().splitlines()[-1])
    return {
        "goodput_bps": result["goodput_bps"],
        "messages_per_s": result["messages_per_s"],
        "messages": result["messages"],
        "seconds": result["seconds"],
        "tx_depth": tx_depth,
        "data_checked": True,
        "cpu_busy": cpu,
    }


def perf_run(
    pair: VethPair, size: int, seconds: float, cores: tuple[int, int], sched: str
) -> dict[str, Any]:
    """One ``mrc-perf`` run at ``size``, each side its own endpoint."""
    server = pinned([*PERF, "--server", "--plane", pair.rx_ip, "--no-agent"], cores[1], sched)
    with Background(pair.rx_ns, server) as background:
        background.wait_ready("server ready")
        command = [*PERF, "--to", pair.rx_ip, "--duration", f"{seconds:g}", "--json"]
        command += ["--message-size", str(size), "--no-agent", "--plane", pair.tx_ip]
        cpu_before = read_proc_stat()
        result = json.loads(run_client(pair.tx_ns, pinned(command, cores[0], sched), 120))
        cpu = pinned_cores_busy(cpu_before, cores)
    return {
        "goodput_bps": result["goodput_bps"],
        "messages_per_s": result["bytes"] / size / result["seconds"],
        "bytes": result["bytes"],
        "seconds": result["seconds"],
        "evs": result["evs"],
        "retransmits": result["connection"]["retransmits"],
        "cpu_busy": cpu,
    }


def summarize(
    sizes: Sequence[int], runs: dict[int, dict[str, list[dict[str, Any]]]], orders: list[Any]
) -> dict[str, Any]:
    """Per size: each side's figures (median, spread, runs) and the paired ratios api /
    mrc_perf of goodput and of messages/s. ``orders`` holds ``run_order`` of every repeat."""
    summary: dict[str, Any] = {}
    for size in sizes:
        entry: dict[str, Any] = {}
        for side in SIDES:
            samples = runs[size][side]
            goodputs = [float(r["goodput_bps"]) for r in samples]
            rates = [float(r["messages_per_s"]) for r in samples]
            entry[side] = {
                "goodput_bps": spread(goodputs, 0)["median"],
                "messages_per_s": spread(rates, 1)["median"],
                "goodput_spread": spread(goodputs, 0),
                "messages_per_s_spread": spread(rates, 1),
                "runs": samples,
            }
        pairs_for = []
        for repeat, order in enumerate(orders):
            sides = dict(order)[size]
            pairs_for.append(
                {
                    "order": sides,
                    "api": runs[size]["api"][repeat]["goodput_bps"],
                    "mrc_perf": runs[size]["mrc_perf"][repeat]["goodput_bps"],
                }
            )
        entry["goodput_ratio"] = paired_summary(pairs_for, "api", "mrc_perf")
        summary[str(size)] = entry
    return summary


def steps(args: argparse.Namespace) -> list[Step]:
    """Every run in the order :func:`bench` makes them, each ``--duration`` long."""
    return [
        Step(f"{side} {size} B repeat {repeat}", args.duration)
        for repeat in range(args.repeat)
        for size, sides in run_order(list(args.sizes), repeat)
        for side in sides
    ]


def figure(run: dict[str, Any], set_aside: Sequence[object]) -> str:
    """A run's progress figure: its goodput and messages/s."""
    rate = f"{float(run['messages_per_s']):.0f} messages/s"
    return with_retries(f"{goodput(run)}, {rate}", set_aside)


def bench(args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    """Every size, both sides, ``args.repeat`` times, counter-balanced; each run a step of
    ``progress`` (:func:`steps`)."""
    available = sorted(os.sched_getaffinity(0))
    cores = (available[0], available[-1])
    sizes = list(args.sizes)
    runs: dict[int, dict[str, list[dict[str, Any]]]] = {
        size: {side: [] for side in SIDES} for size in sizes
    }
    orders: list[list[tuple[int, list[str]]]] = []
    made: list[dict[str, Any]] = []
    retried: list[dict[str, Any]] = []
    with NetnsLab() as lab, tempfile.TemporaryDirectory(prefix="mrc-bench-api-") as scratch:
        pair = make_veth_pair(lab)
        route_peers_via_gateway(pair)
        for repeat in range(args.repeat):
            orders.append(run_order(sizes, repeat))
            for size, sides in orders[-1]:
                for side in sides:
                    measure: Callable[[], dict[str, Any]] = (
                        functools.partial(
                            api_run,
                            pair,
                            size,
                            args.duration,
                            cores,
                            args.sched,
                            Path(scratch),
                            args.tx_depth,
                        )
                        if side == "api"
                        else functools.partial(
                            perf_run, pair, size, args.duration, cores, args.sched
                        )
                    )
                    set_aside: list[dict[str, Any]] = []
                    progress.step_began(len(made))
                    kept = run_unstolen(measure, args.steal_limit, STEAL_RETRIES, set_aside)
                    progress.step_ended(len(made), figure(kept, set_aside))
                    made.append({"repeat": repeat, "size": size, "side": side})
                    runs[size][side].append({"repeat": repeat, "sequence": len(made) - 1, **kept})
                    retried.extend(
                        {"size": size, "side": side, "repeat": repeat, **r} for r in set_aside
                    )
    summary = summarize(sizes, runs, orders)
    result: dict[str, Any] = {
        "setup": {
            "cores": {"sender": cores[0], "receiver": cores[1]},
            "scheduling": " ".join(SCHEDULING[args.sched]) or "normal",
            "duration_s": args.duration,
            "repeat": args.repeat,
            "sizes": sizes,
            "api_tx_depth": args.tx_depth,
            "peer_route": "via the peer as gateway (/32 onlink)",
            "steal_limit": args.steal_limit,
        },
        "sizes": summary,
        "run_order": made,
        "retried_for_steal": retried,
    }
    if TARGET_SIZE in sizes:
        measured = summary[str(TARGET_SIZE)]["goodput_ratio"]["ratio"]["median"]
        result["target"] = {
            "what": f"api goodput / mrc-perf goodput at {TARGET_SIZE} B messages "
            "(median of the paired ratios)",
            "target": TARGET_RATIO,
            "measured": measured,
            "met": measured is not None and measured >= TARGET_RATIO,
        }
    return result


def _sizes(text: str) -> list[int]:
    try:
        values = [int(part, 0) for part in text.split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of sizes") from None
    if not values or any(v < 8 for v in values):
        raise argparse.ArgumentTypeError("every size must be at least 8 bytes")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench_api", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=list(DEFAULT_SIZES),
        help="message sizes in bytes, comma-separated (default 4096,16384,65536,262144)",
    )
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side and size")
    parser.add_argument("--tx-depth", type=int, default=128, help="API WRITEs kept in flight")
    parser.add_argument("--sched", choices=sorted(SCHEDULING), default="nice")
    parser.add_argument("--steal-limit", type=float, default=STEAL_LIMIT)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.repeat < 1 or args.tx_depth < 2:
        parser.error("need --duration > 0, --repeat >= 1 and --tx-depth >= 2")
    if not 0 < args.steal_limit <= 1:
        parser.error("need 0 < --steal-limit <= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict[str, Any] = {
        "benchmark": "bench-api",
        "host": {
            "kernel": platform.release(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            # mypyc-compiled or pure Python (agent/native.py): the agents, the examples and
            # mrc-perf all run this build.
            "agent_build": running_build(),
        },
    }
    if (skip := veth_skip_reason()) is not None:
        report["veth"] = {"skipped": skip}
    else:
        with (
            terminate_on_signals(),
            track(Display(), "bench-api", steps(args), unit="measurements") as progress,
        ):
            report["veth"] = bench(args, progress)
    write_report(report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
