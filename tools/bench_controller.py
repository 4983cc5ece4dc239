"""`make bench-controller`: how fast the controller writes, and how fast it fails over.

1. **Write rate**, on one ``simple_switch_grpc`` (no data ports needed): the same set of route
   entries installed through the controller's own write path (``controller.southbound``:
   plan, phased batches) with one WriteRequest per batch of up to ``--max-batch`` updates, and
   with one entry per WriteRequest, alternately in the same run; between runs the entries are
   deleted again (not timed). Reported: entries per second of each (median over ``--rounds``)
   and their ratio. Target: batching at least 5x single writes.
2. **Failover**, on the leaf-spine preset in Mininet with ``mrc-controller run`` as a child
   process: ``--cuts`` times, a spine link is cut at the patch panel and the time from the cut
   to the controller's ``failover`` event (logged once the last group update is acknowledged)
   is measured; the link is restored before the next cut. Reported: median and max, with the
   probe interval used. Target: median under 100 ms at a 10 ms probe interval.

JSON goes to stdout (and ``--out``). A part whose prerequisites are missing (BMv2, root,
Mininet) is reported as skipped with the reason, and the exit status stays 0.
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
from datetime import datetime
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import finsy as fy

from controller.southbound import p4_program
from controller.southbound.finsy_codec import to_update
from controller.southbound.plan import WritePlan, plan_writes
from controller.southbound.records import ActionCall, RecordSet, TableEntryRecord
from controller.southbound.writer import DEFAULT_MAX_BATCH, BatchWriteError, execute_plan
from hostenv.toolchain import SIMPLE_SWITCH_GRPC, find_tool, is_root, tool_version
from testbed.bmv2 import Bmv2Options, Bmv2Process
from topologies import load_topology_file
from topologies.document import dump_document
from topologies.generator import leaf_spine

REPO = Path(__file__).resolve().parents[1]
BATCH_TARGET = 5.0
FAILOVER_TARGET_MS = 100.0
EVENT_WAIT_S = 10.0
#: Pause after a restoration, so that BMv2's 200 ms link poll has seen the port up again.
SETTLE_S = 0.5
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


async def _timed_write(switch: fy.Switch, plan: WritePlan, max_batch: int) -> dict[str, float]:
    async def send(batch: tuple[Any, ...]) -> None:
        try:
            await switch.write([to_update(update) for update in batch])
        except Exception as error:
            raise BatchWriteError(repr(error)) from None

    started = time.perf_counter()
    outcome = await execute_plan(plan, send, max_batch)
    elapsed = time.perf_counter() - started
    if not outcome.ok:
        raise RuntimeError(f"benchmark write failed: {outcome.error or outcome.failures[0]}")
    return {
        "seconds": round(elapsed, 4),
        "requests": outcome.requests,
        "entries_per_s": round(len(plan) / elapsed, 1),
    }


async def _write_rates(
    address: str, entries: int, rounds: int, max_batch: int
) -> dict[str, list[dict[str, float]]]:
    options = fy.SwitchOptions(
        p4info=p4_program.P4INFO_PATH, p4blob=p4_program.P4BLOB_PATH, initial_election_id=10
    )
    records = route_records(entries)
    install = plan_writes(RecordSet(), records)
    remove = plan_writes(records, RecordSet())
    runs: dict[str, list[dict[str, float]]] = {"batched": [], "single": []}
    async with fy.Switch("bench", address, options) as switch:
        for _ in range(rounds):
            for mode, size in (("batched", max_batch), ("single", 1)):
                runs[mode].append(await _timed_write(switch, install, size))
                await _timed_write(switch, remove, DEFAULT_MAX_BATCH)
    return runs


def bench_write_rate(entries: int, rounds: int, max_batch: int, log_dir: Path) -> dict[str, Any]:
    """Part 1 on a fresh simple_switch_grpc of its own."""
    if find_tool(SIMPLE_SWITCH_GRPC) is None:
        return {"skipped": "simple_switch_grpc not found (see `make doctor`)"}
    grpc_port, thrift_port = _free_port(), _free_port()
    options = Bmv2Options(
        ports={}, device_id=1, grpc_port=grpc_port, thrift_port=thrift_port, log_dir=log_dir
    )
    with Bmv2Process(options):
        runs = asyncio.run(_write_rates(options.grpc_addr, entries, rounds, max_batch))
    batched = statistics.median(run["entries_per_s"] for run in runs["batched"])
    single = statistics.median(run["entries_per_s"] for run in runs["single"])
    speedup = batched / single
    return {
        "entries": entries,
        "rounds": rounds,
        "batched": {"max_batch": max_batch, "entries_per_s": batched, "runs": runs["batched"]},
        "single": {"max_batch": 1, "entries_per_s": single, "runs": runs["single"]},
        "speedup": round(speedup, 2),
        "target_speedup": BATCH_TARGET,
        "meets_target": speedup >= BATCH_TARGET,
    }


# -- part 2: failover ---------------------------------------------------------------------------
def failover_skip_reason() -> str | None:
    """Why the Mininet failover part cannot run here, or None."""
    if not is_root():
        return "needs root (Mininet)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not installed (`make setup`)"
    if find_tool(SIMPLE_SWITCH_GRPC) is None:
        return "simple_switch_grpc not found (see `make doctor`)"
    return None


def bench_failover(cuts: int, interval_ms: int, work_dir: Path) -> dict[str, Any]:
    """Part 2: cut spine links of the leaf-spine preset under a running controller."""
    reason = failover_skip_reason()
    if reason is not None:
        return {"skipped": reason}
    from testbed.mininet import running_network

    topology_file = _leaf_spine_file(work_dir)
    topology = load_topology_file(topology_file)
    event_log = work_dir / "controller-events.jsonl"
    with running_network(topology) as network:
        controller = _start_controller(topology_file, work_dir, event_log, interval_ms)
        try:
            events = _EventTail(event_log)
            events.wait_all_in_service([switch.name for switch in topology.switches])
            samples = [
                _one_cut(network, events, topology.links[index % len(topology.links)])
                for index in range(cuts)
            ]
        finally:
            controller.send_signal(signal.SIGTERM)
            try:
                controller.wait(15)
            except subprocess.TimeoutExpired:
                controller.kill()
    cut_to_update = [sample["cut_to_update_ms"] for sample in samples]
    median = statistics.median(cut_to_update)
    return {
        "topology": topology.name,
        "cuts": cuts,
        "probe_interval_ms": interval_ms,
        "cut_to_last_update_ms": {
            "median": round(median, 2),
            "max": round(max(cut_to_update), 2),
            "min": round(min(cut_to_update), 2),
        },
        "controller_reported_ms": {
            "detection_median": round(statistics.median(s["detection_ms"] for s in samples), 2),
            "programming_median": round(statistics.median(s["programming_ms"] for s in samples), 2),
        },
        "target_median_ms": FAILOVER_TARGET_MS,
        "meets_target": median < FAILOVER_TARGET_MS,
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


def _start_controller(
    topology_file: Path, work_dir: Path, event_log: Path, interval_ms: int
) -> subprocess.Popen[bytes]:
    output = (work_dir / "controller.out").open("ab")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            str(topology_file),
            "--event-log",
            str(event_log),
            "--socket",
            str(work_dir / "controller.sock"),
            "--probe-interval-ms",
            str(interval_ms),
        ],
        cwd=REPO,
        stdout=output,
        stderr=subprocess.STDOUT,
    )


def _one_cut(network: Any, events: _EventTail, link: Any) -> dict[str, Any]:
    a, b = str(link.a), str(link.b)
    mark = events.mark()
    cut_at = time.time()
    network.cut(a, b)
    down = events.wait("failover", lambda e: f"{link.id} down" in e["trigger"], mark)
    mark = events.mark()
    network.restore(a, b)
    events.wait("failover", lambda e: f"{link.id} up" in e["trigger"], mark)
    time.sleep(SETTLE_S)
    updated_at = datetime.fromisoformat(down["ts"]).timestamp()
    return {
        "link": str(link.id),
        "cut_to_update_ms": round((updated_at - cut_at) * 1000, 2),
        "detection_ms": down["detection_ms"],
        "programming_ms": down["programming_ms"],
        "writes": down["writes"],
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
    parser.add_argument("--entries", type=int, default=2000, help="route entries per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each write mode")
    parser.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH)
    parser.add_argument("--cuts", type=int, default=50, help="link cuts in the failover part")
    parser.add_argument("--probe-interval-ms", type=int, default=10)
    parser.add_argument("--skip-failover", action="store_true", help="write rate only")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    work_dir = Path(tempfile.mkdtemp(prefix="mrc-bench-controller-"))
    binary = find_tool(SIMPLE_SWITCH_GRPC)
    result: dict[str, Any] = {
        "benchmark": "controller",
        "host": platform.node(),
        "bmv2": tool_version(SIMPLE_SWITCH_GRPC, binary) if binary else None,
        "write_rate": bench_write_rate(args.entries, args.rounds, args.max_batch, work_dir),
        "failover": {"skipped": "--skip-failover"}
        if args.skip_failover
        else bench_failover(args.cuts, args.probe_interval_ms, work_dir),
        "logs": str(work_dir),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
