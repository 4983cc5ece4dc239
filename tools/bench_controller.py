"""`make bench-controller`: how fast the controller writes, and how fast it fails over.

1. **Write rate**, on one ``simple_switch_grpc`` (no data ports needed; BMv2 target only): the
   same set of route entries installed through the controller's own write path
   (``controller.southbound``: plan, phased batches) with one WriteRequest per batch of up to
   ``--max-batch`` updates, and with one entry per WriteRequest; between runs the entries are
   deleted again (not timed). Each round runs both modes back to back, the first one
   alternating from round to round (batched, single; single, batched; ...:
   :mod:`tools.counterbalance`), so the machine's drift weighs on both alike. Reported: every
   round's pair and its ratio, entries per second of each mode (median over ``--rounds``) and
   the speedup, the median of the rounds' paired ratios, with its spread. Target: batching at
   least 5x single writes.
2. **Failover**, on the leaf-spine preset in Mininet with ``mrc-controller run`` as a child
   process, on ``--target`` ``bmv2`` (LLDP probes) or ``linux`` (kernel switches, link state
   from netlink carrier events): ``--cuts`` times, a spine link is cut at the patch panel and
   the controller's ``failover`` event (logged once the last write of the reaction is
   acknowledged) is awaited; the link is restored before the next cut. Reported per cut and as
   min / median / max: from the cut to that event (``cut_to_last_update_ms``, the bench's and the
   controller's monotonic clocks being the same clock), and the controller's own account
   (``controller_reported_ms``): from the evidence of the cut (bmv2: the send time of the first
   probe that went missing; linux: the carrier event) to the last acknowledged write, split into
   detection and programming. Target: median cut-to-update under 100 ms (at a 10 ms probe
   interval on BMv2).

Every timed write run and every cut records each core's busy share over its window, and each
part's ``summary`` puts ``CPU-bound`` beside its figure when a core was saturated during a run
behind it (:mod:`tools.core_load`). JSON goes to stdout (and ``--out``). A part whose
prerequisites are missing (BMv2, root, Mininet, the linux target's tools) is reported as
skipped with the reason, and the exit status stays 0. Each write run and each cut is told as it
goes on stderr, with its figure (:mod:`experiments.progress`), a part at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import finsy as fy

from controller.southbound import p4_program
from controller.southbound.finsy_codec import to_update
from controller.southbound.interface import LinkEvidence
from controller.southbound.plan import WritePlan, plan_writes
from controller.southbound.records import ActionCall, RecordSet, TableEntryRecord
from controller.southbound.writer import DEFAULT_MAX_BATCH, BatchWriteError, execute_plan
from controller.targets import DEFAULT_TARGET
from experiments.progress import Display, Progress, Step, track
from hostenv.toolchain import SIMPLE_SWITCH_GRPC, find_tool, is_root, tool_version
from testbed.bmv2 import Bmv2Options, Bmv2Process
from testbed.mininet.switch_kind import SwitchKind
from testbed.mininet.switch_target import switch_target, switch_target_names
from tools.core_load import CoreWindow, beside, overall
from tools.counterbalance import ordered, paired_summary, spread
from topologies import load_topology_file
from topologies.document import dump_document
from topologies.generator import leaf_spine

REPO = Path(__file__).resolve().parents[1]
BATCH_TARGET = 5.0
BATCHED, SINGLE = "batched", "single"
WRITE_MODES = (BATCHED, SINGLE)
FAILOVER_TARGET_MS = 100.0
EVENT_WAIT_S = 10.0
#: Pause after a restoration, so that BMv2's 200 ms link poll has seen the port up again.
SETTLE_S = 0.5
#: Where the controller's account of a cut starts, by the evidence its target gives.
EVIDENCE_START = {
    LinkEvidence.PROBES: "from the first missed probe's send time",
    LinkEvidence.CARRIER: "from the carrier event",
}
#: Service ports of the failover part's switches: base + device id.
GRPC_PORT_BASE = 50350
THRIFT_PORT_BASE = 9450


# -- part 1: write rate ------------------------------------------------------------------------
def route_records(count: int) -> RecordSet:
    """``count`` distinct /32 routes, all to next hop 1 (routes reference no entity)."""
    base = int(IPv4Address("10.128.0.0"))
    return RecordSet(
        TableEntryRecord(
            p4_program.ROUTES_V4,
            (("ipv4_dst", (base + index, 32)),),
            ActionCall.of(p4_program.SET_NEXT_ID, next_id=1),
        )
        for index in range(count)
    )


async def _timed_write(switch: fy.Switch, plan: WritePlan, max_batch: int) -> dict[str, Any]:
    async def send(batch: tuple[Any, ...]) -> None:
        try:
            await switch.write([to_update(update) for update in batch])
        except Exception as error:
            raise BatchWriteError(repr(error)) from None

    with CoreWindow() as cores:
        started = time.perf_counter()
        outcome = await execute_plan(plan, send, max_batch)
        elapsed = time.perf_counter() - started
    if not outcome.ok:
        raise RuntimeError(f"benchmark write failed: {outcome.error or outcome.failures[0]}")
    return {
        "seconds": round(elapsed, 4),
        "requests": outcome.requests,
        "entries_per_s": round(len(plan) / elapsed, 1),
        "cores": cores.load,
    }


def write_steps(rounds: int) -> list[Step]:
    """The timed write runs in the order :func:`_write_rates` makes them."""
    return [
        Step(f"{mode} writes, round {round_}")
        for round_ in range(rounds)
        for mode in ordered(WRITE_MODES, round_)
    ]


async def _write_rates(
    address: str, entries: int, rounds: int, max_batch: int, progress: Progress
) -> tuple[dict[str, list[dict[str, Any]]], list[list[str]]]:
    """Every round's run of each mode (a step of ``progress`` each, see :func:`write_steps`),
    and the order each round ran them in."""
    options = fy.SwitchOptions(
        p4info=p4_program.P4INFO_PATH, p4blob=p4_program.P4BLOB_PATH, initial_election_id=10
    )
    records = route_records(entries)
    install = plan_writes(RecordSet(), records)
    remove = plan_writes(records, RecordSet())
    sizes = {BATCHED: max_batch, SINGLE: 1}
    runs: dict[str, list[dict[str, Any]]] = {BATCHED: [], SINGLE: []}
    orders: list[list[str]] = []
    async with fy.Switch("bench", address, options) as switch:
        for round_ in range(rounds):
            order = ordered(WRITE_MODES, round_)
            orders.append(order)
            for mode in order:
                step = len(runs[BATCHED]) + len(runs[SINGLE])
                progress.step_began(step)
                runs[mode].append(await _timed_write(switch, install, sizes[mode]))
                progress.step_ended(step, f"{runs[mode][-1]['entries_per_s']:.0f} entries/s")
                await _timed_write(switch, remove, DEFAULT_MAX_BATCH)
    return runs, orders


def write_rate_summary(
    runs: dict[str, list[dict[str, Any]]], orders: list[list[str]], max_batch: int
) -> dict[str, Any]:
    """Part 1's JSON from its runs: each mode's median, every round's pair (with the verdict
    over its two runs' cores), the speedup, and the speedup in words beside its verdict."""
    repeats = [
        {"order": order, **{mode: runs[mode][index]["entries_per_s"] for mode in WRITE_MODES}}
        for index, order in enumerate(orders)
    ]
    paired = paired_summary(repeats, BATCHED, SINGLE, digits=2)
    speedup = paired["ratio"]["median"]
    for pair in paired["pairs"]:
        index = pair["repeat"]
        pair["cores"] = overall(runs[mode][index].get("cores") for mode in WRITE_MODES)["verdict"]
    bottleneck = overall(run.get("cores") for mode in WRITE_MODES for run in runs[mode])
    return {
        "rounds": len(orders),
        "order": "each round runs both modes back to back; which goes first alternates",
        BATCHED: {
            "max_batch": max_batch,
            "entries_per_s": statistics.median(run["entries_per_s"] for run in runs[BATCHED]),
            "runs": runs[BATCHED],
        },
        SINGLE: {
            "max_batch": 1,
            "entries_per_s": statistics.median(run["entries_per_s"] for run in runs[SINGLE]),
            "runs": runs[SINGLE],
        },
        "pairs": paired["pairs"],
        "speedup": speedup,
        "speedup_spread": paired["ratio"],
        "speedup_median_by_first": paired["ratio_median_by_first"],
        "bottleneck": bottleneck,
        "summary": f"batched / single {beside(speedup, bottleneck)}",
        "target_speedup": BATCH_TARGET,
        "meets_target": speedup is not None and speedup >= BATCH_TARGET,
    }


def bench_write_rate(entries: int, rounds: int, max_batch: int, log_dir: Path) -> dict[str, Any]:
    """Part 1 on a fresh simple_switch_grpc of its own."""
    if find_tool(SIMPLE_SWITCH_GRPC) is None:
        return {"skipped": "simple_switch_grpc not found (see `make doctor`)"}
    grpc_port, thrift_port = _free_port(), _free_port()
    options = Bmv2Options(
        ports={}, device_id=1, grpc_port=grpc_port, thrift_port=thrift_port, log_dir=log_dir
    )
    steps = write_steps(rounds)
    with track(Display(), "bench-controller write rate", steps, setups=1) as progress:
        progress.setup_began("starting simple_switch_grpc")
        with Bmv2Process(options):
            progress.setup_ready("switch up")
            address = options.grpc_addr
            runs, orders = asyncio.run(_write_rates(address, entries, rounds, max_batch, progress))
        progress.setup_ended("switch stopped")
    return {"entries": entries, **write_rate_summary(runs, orders, max_batch)}


# -- part 2: failover ---------------------------------------------------------------------------
def failover_skip_reason(target: str) -> str | None:
    """Why the Mininet failover part cannot run on ``target`` here, or None."""
    if not is_root():
        return "needs root (Mininet)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not installed (`make setup`)"
    if switch_target(target).kind is SwitchKind.BMV2 and find_tool(SIMPLE_SWITCH_GRPC) is None:
        return "simple_switch_grpc not found (see `make doctor`)"
    return None


def failover_summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The spread of each timing over the cuts (min, median, max, mean), the target check
    on the median from cut to last update, and the cores' verdict over the cuts' windows."""
    cut_to_update = spread([s["cut_to_update_ms"] for s in samples], 2)
    median = cut_to_update["median"]
    bottleneck = overall(s.get("cores") for s in samples)
    return {
        "cut_to_last_update_ms": cut_to_update,
        "controller_reported_ms": {
            "evidence_to_last_update": spread([s["duration_ms"] for s in samples], 2),
            "detection": spread([s["detection_ms"] for s in samples], 2),
            "programming": spread([s["programming_ms"] for s in samples], 2),
        },
        "writes": spread([s["writes"] for s in samples], 1),
        "bottleneck": bottleneck,
        "summary": f"median cut to last update {beside(median, bottleneck, 'ms')}",
        "target_median_ms": FAILOVER_TARGET_MS,
        "meets_target": median is not None and median < FAILOVER_TARGET_MS,
    }


def bench_failover(target: str, cuts: int, interval_ms: int, work_dir: Path) -> dict[str, Any]:
    """Part 2: cut spine links of the leaf-spine preset under a running controller."""
    reason = failover_skip_reason(target)
    if reason is not None:
        return {"skipped": reason}
    from testbed.mininet import running_network
    from testbed.targets import TargetUnavailable, check_target

    topology_file = _leaf_spine_file(work_dir)
    topology = load_topology_file(topology_file)
    try:
        check_target(target, topology)
    except TargetUnavailable as error:
        return {"skipped": "; ".join(error.problems)}
    event_log = work_dir / f"controller-events-{target}.jsonl"
    started = time.monotonic()
    links = [topology.links[index % len(topology.links)] for index in range(cuts)]
    steps = [Step(f"cut {link.id}") for link in links]
    title = f"bench-controller failover ({target})"
    samples: list[dict[str, Any]] = []
    with track(Display(), title, steps, setups=1, unit="cuts") as progress:
        progress.setup_began("bringing the network and the controller up")
        with running_network(topology, target=target) as network:
            controller = _start_controller(
                topology_file, work_dir, event_log, interval_ms, target, network.prefix
            )
            try:
                events = _EventTail(event_log)
                events.wait_all_in_service([switch.name for switch in topology.switches])
                progress.setup_ready("every switch in service")
                for index, link in enumerate(links):
                    progress.step_began(index)
                    samples.append(_one_cut(network, events, link))
                    figure = f"cut to last update {samples[-1]['cut_to_update_ms']} ms"
                    progress.step_ended(index, figure)
            finally:
                progress.now_doing("stopping the controller, tearing the network down")
                controller.send_signal(signal.SIGTERM)
                try:
                    controller.wait(15)
                except subprocess.TimeoutExpired:
                    controller.kill()
        progress.setup_ended("network down")
    return {
        "target": target,
        "topology": topology.name,
        "switches": len(topology.switches),
        "cuts": cuts,
        "link_evidence": evidence_account(target),
        "probe_interval_ms": interval_ms if _probes(target) else None,
        **failover_summary(samples),
        "wall_s": round(time.monotonic() - started, 1),
        "samples": samples,
    }


def _leaf_spine_file(work_dir: Path) -> Path:
    """The leaf-spine preset on service ports of its own (a run on the default ports, such as
    the Mininet tests', may be up at the same time)."""
    document = leaf_spine(2, 4, 2, name="leaf-spine")
    for switch in document["switches"]:
        switch["grpc_port"] = GRPC_PORT_BASE + switch["device_id"]
        switch["thrift_port"] = THRIFT_PORT_BASE + switch["device_id"]
    path = work_dir / "leaf-spine.yaml"
    path.write_text(dump_document(document), encoding="utf-8")
    return path


def _probes(target: str) -> bool:
    """Whether the controller finds ``target``'s links by probes (else by carrier)."""
    return switch_target(target).capabilities.link_evidence is LinkEvidence.PROBES


def evidence_account(target: str) -> str:
    """What the controller takes as evidence of a cut on ``target``, and where its account of
    the failover starts."""
    capabilities = switch_target(target).capabilities
    return f"{capabilities.link_source}: {EVIDENCE_START[capabilities.link_evidence]}"


def controller_command(
    topology_file: Path, work_dir: Path, event_log: Path, interval_ms: int, target: str, prefix: str
) -> list[str]:
    """``mrc-controller run`` for the failover part: told the target (unless the default) and,
    for switches in namespaces of their own, where they are; a probe interval where links are
    found by probes (a controller that watches carrier sends none)."""
    command = [sys.executable, "-m", "controller.cli", "run", str(topology_file)]
    command += ["--event-log", str(event_log), "--socket", str(work_dir / "controller.sock")]
    if target != DEFAULT_TARGET:
        command += ["--target", target]
    if switch_target(target).kind.in_own_namespace:
        command += ["--netns-prefix", prefix]
    if _probes(target):
        command += ["--probe-interval-ms", str(interval_ms)]
    return command


def _start_controller(
    topology_file: Path, work_dir: Path, event_log: Path, interval_ms: int, target: str, prefix: str
) -> subprocess.Popen[bytes]:
    output = (work_dir / f"controller-{target}.out").open("ab")
    return subprocess.Popen(
        controller_command(topology_file, work_dir, event_log, interval_ms, target, prefix),
        cwd=REPO,
        stdout=output,
        stderr=subprocess.STDOUT,
    )


def _one_cut(network: Any, events: _EventTail, link: Any) -> dict[str, Any]:
    """Cut ``link``, wait for the controller's failover around it, restore it and wait for the
    failover back. Times are on the monotonic clock, which the controller's event log carries
    (``mono``) and which this process shares with it. The cores' busy share is taken over
    the window the figure measures, from the cut to the failover event."""
    a, b = str(link.a), str(link.b)
    mark = events.mark()
    with CoreWindow() as cores:
        cut_at = time.monotonic()
        network.cut(a, b)
        down = events.wait("failover", lambda e: f"{link.id} down" in e["trigger"], mark)
    mark = events.mark()
    network.restore(a, b)
    events.wait("failover", lambda e: f"{link.id} up" in e["trigger"], mark)
    time.sleep(SETTLE_S)
    return {
        "link": str(link.id),
        "cut_to_update_ms": round((down["mono"] - cut_at) * 1000, 2),
        "duration_ms": down["duration_ms"],
        "detection_ms": down["detection_ms"],
        "programming_ms": down["programming_ms"],
        "writes": down["writes"],
        "complete": down["complete"],
        "cores": cores.load,
    }


class _EventTail:
    """The controller's event log, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._offset = 0

    def _poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        self.events += [json.loads(line) for line in complete.splitlines() if line.strip()]

    def mark(self) -> int:
        self._poll()
        return len(self.events)

    def wait(self, name: str, where: Any, after: int, timeout: float = EVENT_WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._poll()
            for event in self.events[after:]:
                if event["event"] == name and where(event):
                    return event
            time.sleep(0.005)
        raise TimeoutError(f"controller logged no matching {name!r} within {timeout} s")

    def wait_all_in_service(self, switches: list[str], timeout: float = 120.0) -> None:
        for switch in switches:
            self.wait("switch_in_service", lambda e, s=switch: e["switch"] == s, 0, timeout)


# -- driver -------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target",
        choices=switch_target_names(),
        default=DEFAULT_TARGET,
        help="switches of the failover part; only bmv2 has a write-rate part (P4Runtime on a "
        "simple_switch_grpc)",
    )
    parser.add_argument("--entries", type=int, default=2000, help="route entries per run")
    parser.add_argument(
        "--rounds", type=int, default=4, help="pairs of write runs (even: each mode first as often)"
    )
    parser.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH)
    parser.add_argument("--cuts", type=int, default=50, help="link cuts in the failover part")
    parser.add_argument("--probe-interval-ms", type=int, default=10, help="bmv2: LLDP interval")
    parser.add_argument("--skip-failover", action="store_true", help="write rate only")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.cuts < 1:
        print("bench-controller: --rounds and --cuts must be at least 1", file=sys.stderr)
        return 2
    work_dir = Path(tempfile.mkdtemp(prefix="mrc-bench-controller-"))
    binary = find_tool(SIMPLE_SWITCH_GRPC)
    kind = switch_target(args.target).kind
    write_rate = (
        bench_write_rate(args.entries, args.rounds, args.max_batch, work_dir)
        if kind is SwitchKind.BMV2
        else {
            "skipped": f"P4Runtime write rate: bmv2 only (target {args.target} runs {kind} "
            "switches)"
        }
    )
    result: dict[str, Any] = {
        "benchmark": "controller",
        "target": args.target,
        "host": platform.node(),
        "kernel": platform.release(),
        "bmv2": tool_version(SIMPLE_SWITCH_GRPC, binary) if binary else None,
        "write_rate": write_rate,
        "failover": {"skipped": "--skip-failover"}
        if args.skip_failover
        else bench_failover(args.target, args.cuts, args.probe_interval_ms, work_dir),
        "logs": str(work_dir),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
