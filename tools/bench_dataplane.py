"""`make bench-dataplane`: BMv2 forwarding rate of mrc.p4 against a plain L3 program, same run.

Each program runs on a simple_switch_grpc of its own, all pinned to one core, fed a pcap of MRC
data packets by `tcpreplay --topspeed`, which offers far more than BMv2 can forward, so the
switch is the bottleneck. The rate is what leaves the switch: packets counted on the sink
interfaces between the first and the last delivery. JSON goes to stdout (and --out).

Two figures, each a ratio mrc.p4 / baseline over the same packets:

* ``forwarding``: what mrc.p4 costs where it does what the baseline does. Both programs leave
  by the same four ports: the baseline through four host routes (the pcap's four destinations,
  one port each), mrc.p4 through one route to a four-member selector group hashed on the EV.
  mrc.p4 gets no trim_config and no port_ecn entries, so it trims and marks nothing: under
  `--topspeed` overload a trimming switch would turn packets the baseline drops into headers
  that count as delivered, and the figure would reward trimming instead of measuring
  forwarding. Plain data packets (BTH, METH, RETH).
* ``program_work``: what mrc.p4 costs when everything in it runs: the full data-packet parser
  path (TSETH, RETH and ImmDt on every packet, retransmissions among them), a ``--members``
  (64) member selector group, a trim_config lookup and occupancy read on every packet (threshold
  above any queue, so nothing is trimmed) and RED-like ECN marking. The baseline forwards the
  same packets by the same four host routes.

Every repeat runs both programs of a figure back to back, the first one alternating from repeat
to repeat (:mod:`tools.counterbalance`); a figure's ratio is the median of the repeats' paired
ratios, reported with each pair and the spread. Packets mrc.p4 trimmed (its trim counter) are
subtracted from what it delivered, so a trim could never raise its rate.
Every replay records each core's busy share from its first to its last delivery
(:mod:`tools.core_load`). The switch's core is
meant to be the limit here, so ``CPU-bound`` is the expected verdict: the ratio is then what
each program costs BMv2 per packet, and the per-core shares show whether the sender's core
(or another job) was saturated as well.
Target: ``forwarding`` ratio >= 0.7.

Each replay is told as it goes on stderr, with its packets/s (:mod:`experiments.progress`);
the measurement runs in a namespace of its own, whose process hands its stderr straight on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import finsy as fy
from scapy.utils import wrpcap

from controller.southbound import p4_program
from controller.southbound.p4_program import P4_CLASS_OF
from experiments.cpu import core_times
from experiments.progress import Display, Progress, Step, track
from hostenv.netns import NetnsLab, terminate_on_signals
from hostenv.toolchain import SIMPLE_SWITCH_GRPC, TCPREPLAY, find_tool, is_root, tool_version
from p4src import BUILD_DIR
from testbed.bmv2 import Bmv2Options, Bmv2Process
from tools.core_load import beside, overall, window_load
from tools.counterbalance import ordered, paired_summary
from tools.p4rt_sync import SyncSwitch
from wire.constants import Opcode
from wire.entropy import ev_from_headers
from wire.frames import Envelope, mrc_data_packet

REPO = Path(__file__).resolve().parents[1]
BUILD = BUILD_DIR
INGRESS_PORT = 1
SINK_PORTS = (2, 3, 4, 5)
#: One destination host per sink port: the baseline's four host routes.
DESTINATIONS = tuple(f"10.0.2.{index + 1}" for index in range(len(SINK_PORTS)))
SOURCE = "10.0.1.1"
EVS = 256
# The switch and the traffic generator each get a core of their own (the last two of the machine).
SWITCH_CPU = str(max(os.cpu_count() or 1, 1) - 1)
SENDER_CPU = str(max((os.cpu_count() or 1) - 2, 0))
SWITCH_MAC = "00:00:00:00:aa:01"
BM_CONFIG_H = Path("/usr/local/include/bm/config.h")
BASELINE, MRC = "l3_baseline", "mrc"
PROGRAMS = (BASELINE, MRC)
TARGET_RATIO = 0.7
#: A trim threshold no queue reaches (qdepth_t is 19 bits; BMv2's queues hold 64 packets):
#: the lookup and the occupancy read run on every packet, the cut never does.
NEVER_TRIM = (1 << 19) - 1
#: ECN marking between these normal-priority queue depths (as the controller's defaults do).
ECN_MIN_QDEPTH, ECN_MAX_QDEPTH = 16, 48
#: Opcodes of the full parser path: both carry an immediate, and every packet a TSETH.
FULL_PATH_OPCODES = (Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST_IMM)
#: Every this many packets of the full path is a retransmission (the TRIMMABLE_RETX class).
RETX_EVERY = 8


@dataclass(frozen=True)
class Figure:
    """One comparison: which packets, and how much of mrc.p4 runs on them."""

    name: str
    #: "plain": BTH METH RETH payload; "full": BTH METH TSETH RETH ImmDt payload, some RTX.
    packets: str
    #: Members of mrc.p4's selector group, spread round-robin over the sink ports.
    members: int
    #: trim_config entries (threshold NEVER_TRIM) on every sink port.
    trim_lookup: bool
    #: port_ecn entries marking between ECN_MIN_QDEPTH and ECN_MAX_QDEPTH.
    ecn_marking: bool
    meaning: str


def figures(members: int) -> tuple[Figure, Figure]:
    """The two figures of the bench (see the module docstring)."""
    return (
        Figure(
            "forwarding",
            "plain",
            len(SINK_PORTS),
            trim_lookup=False,
            ecn_marking=False,
            meaning="forwarding rate at equal work: same packets, same four egress ports, "
            "mrc.p4 with trimming and ECN marking off",
        ),
        Figure(
            "program_work",
            "full",
            members,
            trim_lookup=True,
            ecn_marking=True,
            meaning="the cost of mrc.p4's whole per-packet path (full MRC parser path, "
            f"{members}-member selector group, trim lookup, ECN marking) against plain L3 "
            "on the same packets and ports",
        ),
    )


def bmv2_build_options() -> dict[str, object]:
    """What BMv2 was built with, as far as its installed config header tells."""
    opts: dict[str, object] = {}
    if BM_CONFIG_H.exists():
        text = BM_CONFIG_H.read_text()
        for macro in (
            "BM_LOG_DEBUG_ON",
            "BM_LOG_TRACE_ON",
            "BM_ELOG_ON",
            "BM_NANOMSG_ON",
            "BM_DEBUG_ON",
        ):
            opts[macro] = f"#define {macro}" in text
    path = find_tool(SIMPLE_SWITCH_GRPC)
    opts["version"] = tool_version(SIMPLE_SWITCH_GRPC, path) if path else None
    return opts


# -- traffic --------------------------------------------------------------------------------------
def packet_fields(kind: str, index: int) -> dict[str, Any]:
    """The varying fields of packet ``index`` of a pcap of ``kind`` ("plain" or "full"): its
    destination (the four hosts in turn), EV (256 in turn), opcode, immediate, TSETH timestamp
    and whether it is a retransmission."""
    fields: dict[str, Any] = {
        "dst": DESTINATIONS[index % len(DESTINATIONS)],
        "ev": ev_from_headers(49152 + index % EVS),
        "opcode": Opcode.WRITE_ONLY,
        "imm": None,
        "tx_ts": None,
        "retransmission": False,
    }
    if kind == "full":
        fields["opcode"] = FULL_PATH_OPCODES[(index // len(DESTINATIONS)) % 2]
        fields["imm"] = index & 0xFFFFFFFF
        fields["tx_ts"] = index & 0xFFFF
        fields["retransmission"] = index % RETX_EVERY == RETX_EVERY - 1
    elif kind != "plain":
        raise ValueError(f"unknown packet kind {kind!r}")
    return fields


def make_pcap(path: Path, count: int, kind: str) -> None:
    """``count`` MRC data packets (256-byte payload) as a host agent would spray them."""
    payload = bytes(range(256))
    packets = []
    for i in range(count):
        f = packet_fields(kind, i)
        packets.append(
            mrc_data_packet(
                Envelope(SOURCE, f["dst"], ev=f["ev"], dst_mac=SWITCH_MAC),
                dqpn=0x12,
                psn=i,
                opcode=f["opcode"],
                payload=payload,
                va=0x1000 + 256 * i,
                rkey=0x42,
                imm=f["imm"],
                tx_ts=f["tx_ts"],
                retransmission=f["retransmission"],
            )
        )
    wrpcap(str(path), packets)


# -- programming ----------------------------------------------------------------------------------
def member_ports(members: int, ports: Sequence[int] = SINK_PORTS) -> list[int]:
    """The egress port of each member of a ``members``-member group: the ports in turn, so
    every port gets the same share of members (one more for the first ports when it does not
    divide)."""
    if members < 1:
        raise ValueError(f"a group needs at least one member, got {members}")
    return [ports[index % len(ports)] for index in range(members)]


def baseline_entries() -> list[Any]:
    """Four host routes, one per destination and port: the baseline's fan-out."""
    return [
        fy.P4TableEntry(
            "L3Ingress.routes_v4",
            match=fy.P4TableMatch(ipv4_dst=f"{dst}/32"),
            action=fy.P4TableAction(
                "L3Ingress.forward", port=port, smac=SWITCH_MAC, dmac=f"00:00:00:00:00:{port:02x}"
            ),
        )
        for dst, port in zip(DESTINATIONS, SINK_PORTS, strict=True)
    ]


def program_mrc(sw: SyncSwitch, figure: Figure) -> None:
    """Classes, the selector group, the route; trim lookups and ECN marking as the figure says."""
    sw.insert(
        fy.P4TableEntry(
            p4_program.DSCP_CLASSES,
            match=fy.P4TableMatch(dscp=int(d)),
            action=fy.P4TableAction(p4_program.SET_CLASS, mrc_class=c),
        )
        for d, c in P4_CLASS_OF.items()
    )
    ports = member_ports(figure.members)
    sw.insert(
        fy.P4ActionProfileMember(
            p4_program.HASHED_SELECTOR,
            member_id=index + 1,
            action=fy.P4TableAction(
                p4_program.ROUTING_HASHED,
                port=port,
                smac=SWITCH_MAC,
                dmac=f"00:00:00:00:{index // 256:02x}:{index % 256:02x}",
                member_index=index + 1,
            ),
        )
        for index, port in enumerate(ports)
    )
    members = [fy.P4Member(index + 1, weight=(1, port)) for index, port in enumerate(ports)]
    sw.insert([fy.P4ActionProfileGroup(p4_program.HASHED_SELECTOR, group_id=1, members=members)])
    sw.insert(
        [
            fy.P4TableEntry(
                p4_program.NEXT_HASHED,
                match=fy.P4TableMatch(next_id=1),
                action=fy.P4IndirectAction(group_id=1),
            ),
            fy.P4TableEntry(
                p4_program.ROUTES_V4,
                match=fy.P4TableMatch(ipv4_dst="10.0.2.0/24"),
                action=fy.P4TableAction(p4_program.SET_NEXT_ID, next_id=1),
            ),
        ]
    )
    if figure.trim_lookup:
        sw.insert(
            fy.P4TableEntry(
                p4_program.TRIM_CONFIG,
                match=fy.P4TableMatch(egress_port=port),
                action=fy.P4TableAction(
                    p4_program.SET_TRIM_CONFIG, threshold=NEVER_TRIM, host_facing=0
                ),
            )
            for port in SINK_PORTS
        )
    if figure.ecn_marking:
        sw.insert(
            fy.P4TableEntry(
                p4_program.PORT_ECN,
                match=fy.P4TableMatch(egress_port=port),
                action=fy.P4TableAction(
                    p4_program.SET_ECN_THRESHOLDS,
                    min_qdepth=ECN_MIN_QDEPTH,
                    max_qdepth=ECN_MAX_QDEPTH,
                ),
            )
            for port in SINK_PORTS
        )


# -- measuring ------------------------------------------------------------------------------------
def delivered_per_port(prefix: str) -> dict[int, int]:
    """Packets each sink interface of one rig has received."""
    return {
        port: int(Path(f"/sys/class/net/{prefix}h{port}/statistics/rx_packets").read_text())
        for port in SINK_PORTS
    }


def replay_once(pcap: Path, loops: int, prefix: str) -> dict[str, Any]:
    """Offer the pcap at top speed; packets delivered (in all and per port), the seconds
    from the first to the last delivery, and each core's busy share over those same seconds
    (:mod:`tools.core_load`)."""
    base = delivered_per_port(prefix)
    replay = subprocess.Popen(
        [
            "taskset",
            "-c",
            SENDER_CPU,
            "tcpreplay",
            "--topspeed",
            f"--loop={loops}",
            "-q",
            "-i",
            f"{prefix}h{INGRESS_PORT}",
            str(pcap),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    start_total = sum(base.values())
    first_t = last_t = None
    first_n = last_n = start_total
    first_cores = last_cores = core_times()
    idle_since = time.monotonic()
    while True:
        now = time.monotonic()
        n = sum(delivered_per_port(prefix).values())
        if n != last_n:
            cores = core_times()
            if first_t is None:
                first_t, first_n, first_cores = now, last_n, cores
            last_t, last_n, idle_since, last_cores = now, n, now, cores
        elif replay.poll() is not None and now - idle_since > 1.0:
            break
        time.sleep(0.01)
    _, err = replay.communicate()
    if replay.returncode != 0:
        raise RuntimeError(f"tcpreplay failed: {err.decode().strip()}")
    if first_t is None or last_t is None or last_t <= first_t:
        raise RuntimeError(f"{prefix}: no packets came out of the switch")
    end = delivered_per_port(prefix)
    return {
        "delivered": last_n - first_n,
        "seconds": last_t - first_t,
        "per_port": {str(port): end[port] - base[port] for port in SINK_PORTS},
        "cores": window_load(first_cores, last_cores),
    }


class Rig:
    """One BMv2 running one program for one figure, on veths of its own, with its P4Runtime
    connection kept open to read counters between replays."""

    def __init__(
        self, lab: NetnsLab, program: str, figure: Figure, index: int, log_dir: Path
    ) -> None:
        self.program = program
        self.figure = figure
        self.prefix = f"{program[0]}{figure.name[0]}"
        ports = {p: f"{self.prefix}sw{p}" for p in (INGRESS_PORT, *SINK_PORTS)}
        for port, ifname in ports.items():
            lab.add_veth(ifname, f"{self.prefix}h{port}")
        opts = Bmv2Options(
            ports=ports,
            device_id=index + 1,
            grpc_port=9559 + index,
            thrift_port=9090 + index,
            log_dir=log_dir,
            cpus=SWITCH_CPU,
        )
        self.switch = Bmv2Process(opts)
        self.sw: SyncSwitch | None = None
        try:
            self.sw = SyncSwitch(
                opts.grpc_addr,
                BUILD / f"{program}.p4info.txtpb",
                BUILD / f"{program}.json",
                device_id=opts.device_id,
                force_pipeline=True,
            )
            if program == BASELINE:
                self.sw.insert(baseline_entries())
            else:
                program_mrc(self.sw, figure)
        except BaseException:
            self.close()
            raise

    def counters(self) -> dict[str, int]:
        """mrc.p4's trims and ECN marks on the sink ports and its own drops at the ingress
        port so far (the baseline has no counters: zeros)."""
        if self.program != MRC or self.sw is None:
            return {"trimmed": 0, "ecn_marked": 0, "program_drops": 0}
        sw = self.sw
        return {
            "trimmed": sum(sw.counter(p4_program.TRIMS, port)[0] for port in SINK_PORTS),
            "ecn_marked": sum(sw.counter(p4_program.ECN_MARKS, port)[0] for port in SINK_PORTS),
            "program_drops": sw.counter(p4_program.PORT_DROPS, INGRESS_PORT)[0],
        }

    def members_used(self) -> int | None:
        """How many of mrc.p4's group members forwarded at least one packet (None: baseline)."""
        if self.program != MRC or self.sw is None:
            return None
        cells = self.sw.read(fy.P4CounterEntry(p4_program.MEMBER_PACKETS))
        return sum(1 for cell in cells if cell.packet_count > 0)

    def replay(self, pcap: Path, loops: int) -> dict[str, Any]:
        """One replay, with what mrc.p4 trimmed and marked during it; ``pps`` counts only
        whole packets (delivered minus trimmed)."""
        before = self.counters()
        run = replay_once(pcap, loops, self.prefix)
        after = self.counters()
        for name in before:
            run[name] = after[name] - before[name]
        run["pps"] = (run["delivered"] - run["trimmed"]) / run["seconds"]
        run["seconds"] = round(run["seconds"], 3)
        run["pps"] = round(run["pps"], 1)
        return run

    def close(self) -> None:
        try:
            if self.sw is not None:
                self.sw.close()
        finally:
            self.switch.stop()


def summarize_figure(
    figure: Figure, runs: dict[str, list[dict[str, Any]]], orders: list[list[str]]
) -> dict[str, Any]:
    """One figure's JSON: each program's runs and median, every repeat's pair (with the
    verdict over its two runs' cores), the ratio, and the ratio in words beside its verdict."""
    repeats = [
        {"order": order, BASELINE: runs[BASELINE][i]["pps"], MRC: runs[MRC][i]["pps"]}
        for i, order in enumerate(orders)
    ]
    paired = paired_summary(repeats, MRC, BASELINE)
    ratio = paired["ratio"]["median"]
    for pair in paired["pairs"]:
        index = pair["repeat"]
        pair["cores"] = overall(runs[p][index].get("cores") for p in PROGRAMS)["verdict"]
    bottleneck = overall(run.get("cores") for p in PROGRAMS for run in runs[p])
    result: dict[str, Any] = {"meaning": figure.meaning, "setup": asdict(figure)}
    for program in PROGRAMS:
        rates = [run["pps"] for run in runs[program]]
        result[program] = {"pps": round(statistics.median(rates), 1), "runs": runs[program]}
    result.update(
        {
            "pairs": paired["pairs"],
            "ratio_spread": paired["ratio"],
            "ratio_median_by_first": paired["ratio_median_by_first"],
            "ratio_mrc_to_baseline": ratio,
            "trimmed_total": sum(run["trimmed"] for run in runs[MRC]),
            "bottleneck": bottleneck,
            "summary": beside(ratio, bottleneck),
        }
    )
    return result


def replays(repeats: int, members: int) -> list[tuple[int, Figure, str]]:
    """Every replay as (repeat, figure, program), in the order :func:`measure_all` makes them:
    each repeat runs each figure's two programs back to back, the figures and the programs
    each in :func:`ordered`'s alternating order."""
    chosen = figures(members)
    return [
        (repeat, figure, program)
        for repeat in range(repeats)
        for figure in ordered(chosen, repeat)
        for program in ordered(PROGRAMS, repeat)
    ]


def steps(repeats: int, members: int) -> list[Step]:
    """The replays as progress steps (a replay's length is the switch's rate's to tell)."""
    return [
        Step(f"{figure.name} {program} repeat {repeat}")
        for repeat, figure, program in replays(repeats, members)
    ]


def measure_all(
    pcaps: dict[str, Path],
    loops: int,
    repeats: int,
    members: int,
    log_dir: Path,
    progress: Progress,
) -> dict[str, dict[str, Any]]:
    """Both figures, both programs, every replay of :func:`replays` (a step of ``progress``
    each, the rigs' start its one bring-up).

    Runs inside the benchmark's own namespace (see `main`), where BMv2's gRPC ports are local."""
    chosen = figures(members)
    rigs: dict[tuple[str, str], Rig] = {}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        f.name: {p: [] for p in PROGRAMS} for f in chosen
    }
    orders: dict[str, list[list[str]]] = {f.name: [] for f in chosen}
    members_used: dict[str, int | None] = {}
    with NetnsLab() as lab:
        try:
            progress.setup_began(f"starting {len(chosen) * len(PROGRAMS)} BMv2 switches")
            for figure in chosen:
                for program in PROGRAMS:
                    rigs[figure.name, program] = Rig(lab, program, figure, len(rigs), log_dir)
            progress.setup_ready("switches programmed")
            step = 0  # the replays come in the order of replays(), one step each
            for repeat in range(repeats):
                for figure in ordered(chosen, repeat):
                    order = ordered(PROGRAMS, repeat)
                    orders[figure.name].append(order)
                    for program in order:
                        progress.step_began(step)
                        run = rigs[figure.name, program].replay(pcaps[figure.packets], loops)
                        progress.step_ended(step, f"{run['pps']:.0f} packets/s")
                        step += 1
                        run["repeat"] = repeat
                        runs[figure.name][program].append(run)
            for figure in chosen:
                members_used[figure.name] = rigs[figure.name, MRC].members_used()
        finally:
            for rig in rigs.values():
                rig.close()
    progress.setup_ended("switches stopped")
    results = {}
    for figure in chosen:
        result = summarize_figure(figure, runs[figure.name], orders[figure.name])
        result["mrc_members_used"] = members_used[figure.name]
        results[figure.name] = result
    return results


def run_inside(args: argparse.Namespace) -> dict[str, object]:
    log_dir = Path(tempfile.mkdtemp(prefix="mrc-bench-dp-"))
    pcaps = {kind: log_dir / f"mrc-{kind}.pcap" for kind in ("plain", "full")}
    chosen = steps(args.repeats, args.members)
    with track(Display(), "bench-dataplane", chosen, setups=1, unit="replays") as progress:
        progress.now_doing(f"writing {len(pcaps)} pcaps of {args.packets} packets")
        for kind, path in pcaps.items():
            make_pcap(path, args.packets, kind)
        started = time.monotonic()
        results = measure_all(pcaps, args.loops, args.repeats, args.members, log_dir, progress)
    forwarding = results["forwarding"]["ratio_mrc_to_baseline"]
    return {
        "benchmark": "dataplane",
        "baseline": "l3_baseline.p4 (same parser up to UDP, one LPM table)",
        "fan_out": f"both programs leave by ports {list(SINK_PORTS)}: the baseline by one /32 "
        f"route per destination ({', '.join(DESTINATIONS)}), mrc.p4 by a selector group",
        "order": "each repeat runs a figure's two programs back to back; which goes first "
        "alternates by repeat (A B, B A, ...), and so does the order of the figures",
        "packets_offered_per_replay": args.packets * args.loops,
        "repeats": args.repeats,
        "figures": results,
        "ratio_mrc_to_baseline": forwarding,
        "summary": {name: result["summary"] for name, result in results.items()},
        "program_work_ratio": results["program_work"]["ratio_mrc_to_baseline"],
        "target_ratio": TARGET_RATIO,
        "meets_target": forwarding is not None and forwarding >= TARGET_RATIO,
        "wall_s": round(time.monotonic() - started, 1),
        "bmv2_build": bmv2_build_options(),
        "kernel": platform.release(),
        "cpus": {"switch": SWITCH_CPU, "tcpreplay": SENDER_CPU, "online": os.cpu_count()},
        "load_average_at_end": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=20000, help="packets in each pcap")
    parser.add_argument("--loops", type=int, default=10, help="tcpreplay --loop")
    parser.add_argument(
        "--repeats", type=int, default=4, help="pairs per figure (even: each order as often)"
    )
    parser.add_argument(
        "--members", type=int, default=64, help="selector group size of the program_work figure"
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.members < 1:
        print("bench-dataplane: --repeats and --members must be at least 1", file=sys.stderr)
        return 2
    if args.inside:
        json.dump(run_inside(args), sys.stdout, indent=2)
        print()
        return 0
    missing = [t.name for t in (SIMPLE_SWITCH_GRPC, TCPREPLAY) if find_tool(t) is None]
    if missing or not is_root():
        print(
            f"bench-dataplane needs {', '.join(missing) or 'root'} (see `make doctor`)",
            file=sys.stderr,
        )
        return 2
    # Run the measurement in a namespace of its own: its veths and BMv2's gRPC port never touch
    # the host, and deleting the namespace cleans everything even after a crash.
    with terminate_on_signals(), NetnsLab() as lab:
        ns = lab.add_netns("bench")
        inner = [
            sys.executable,
            "-m",
            "tools.bench_dataplane",
            "--inside",
            "--packets",
            str(args.packets),
            "--loops",
            str(args.loops),
            "--repeats",
            str(args.repeats),
            "--members",
            str(args.members),
        ]
        # Its stderr (the progress, any error) passes straight on; its stdout is the JSON.
        proc = subprocess.run(
            ["ip", "netns", "exec", ns, *inner],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        print(proc.stdout, file=sys.stderr)
        return proc.returncode
    print(proc.stdout, end="")
    if args.out:
        args.out.write_text(proc.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
