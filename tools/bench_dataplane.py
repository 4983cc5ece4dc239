"""`make bench-dataplane`: BMv2 forwarding rate of mrc.p4 against a plain L3 program, same run.

Both programs run on the same simple_switch_grpc, one after the other, fed the same pcap of MRC
data packets (256 EVs) by `tcpreplay --topspeed`, which offers far more than BMv2 can forward, so
the switch is the bottleneck. The rate is what leaves the switch: packets counted on the sink
interfaces between the first and the last delivery. JSON goes to stdout (and --out).
mrc.p4 exercises its selector (a 4-member group), classification, trimming check and ECN table;
the baseline does one LPM lookup. Target: mrc.p4 >= 0.7x the baseline.
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
from pathlib import Path

import finsy as fy
from scapy.utils import wrpcap

from controller.southbound.p4_program import P4_CLASS_OF
from hostenv.netns import NetnsLab, terminate_on_signals
from hostenv.toolchain import SIMPLE_SWITCH_GRPC, TCPREPLAY, find_tool, is_root, tool_version
from p4src import BUILD_DIR
from testbed.bmv2 import Bmv2Options, Bmv2Process
from tools.p4rt_sync import SyncSwitch
from wire.frames import Envelope, mrc_data_packet

REPO = Path(__file__).resolve().parents[1]
BUILD = BUILD_DIR
SINK_PORTS = (2, 3, 4, 5)
# The switch and the traffic generator each get a core of their own (the last two of the machine).
SWITCH_CPU = str(max(os.cpu_count() or 1, 1) - 1)
SENDER_CPU = str(max((os.cpu_count() or 1) - 2, 0))
SWITCH_MAC = "00:00:00:00:aa:01"
BM_CONFIG_H = Path("/usr/local/include/bm/config.h")


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


def make_pcap(path: Path, count: int) -> None:
    """MRC data packets (256-byte payload) over 256 EVs, as a host agent would spray them."""
    payload = bytes(range(256))
    packets = [
        mrc_data_packet(
            Envelope("10.0.1.1", "10.0.2.2", ev=(49152 + i % 256) << 16, dst_mac=SWITCH_MAC),
            dqpn=0x12,
            psn=i,
            payload=payload,
            va=0x1000 + 256 * i,
            rkey=0x42,
        )
        for i in range(count)
    ]
    wrpcap(str(path), packets)


def program_entries(sw: SyncSwitch, program: str) -> None:
    if program == "l3_baseline":
        sw.insert(
            [
                fy.P4TableEntry(
                    "L3Ingress.routes_v4",
                    match=fy.P4TableMatch(ipv4_dst="10.0.2.0/24"),
                    action=fy.P4TableAction(
                        "L3Ingress.forward",
                        port=SINK_PORTS[0],
                        smac=SWITCH_MAC,
                        dmac="00:00:00:00:00:02",
                    ),
                )
            ]
        )
        return
    sw.insert(
        [
            fy.P4TableEntry(
                "MrcIngress.classify.dscp_classes",
                match=fy.P4TableMatch(dscp=int(d)),
                action=fy.P4TableAction("MrcIngress.classify.set_class", mrc_class=c),
            )
            for d, c in P4_CLASS_OF.items()
        ]
    )
    members = []
    for i, port in enumerate(SINK_PORTS):
        sw.insert(
            [
                fy.P4ActionProfileMember(
                    "MrcIngress.next.hashed_selector",
                    member_id=i + 1,
                    action=fy.P4TableAction(
                        "MrcIngress.next.routing_hashed",
                        port=port,
                        smac=SWITCH_MAC,
                        dmac=f"00:00:00:00:00:{port:02x}",
                        member_index=i + 1,
                    ),
                )
            ]
        )
        members.append(fy.P4Member(i + 1, weight=(1, port)))
    sw.insert(
        [fy.P4ActionProfileGroup("MrcIngress.next.hashed_selector", group_id=1, members=members)]
    )
    sw.insert(
        [
            fy.P4TableEntry(
                "MrcIngress.next.hashed",
                match=fy.P4TableMatch(next_id=1),
                action=fy.P4IndirectAction(group_id=1),
            )
        ]
    )
    sw.insert(
        [
            fy.P4TableEntry(
                "MrcIngress.routing.routes_v4",
                match=fy.P4TableMatch(ipv4_dst="10.0.2.0/24"),
                action=fy.P4TableAction("MrcIngress.routing.set_next_id", next_id=1),
            )
        ]
    )
    for port in SINK_PORTS:
        sw.insert(
            [
                fy.P4TableEntry(
                    "MrcIngress.trim.trim_config",
                    match=fy.P4TableMatch(egress_port=port),
                    action=fy.P4TableAction(
                        "MrcIngress.trim.set_trim_config", threshold=48, host_facing=0
                    ),
                ),
                fy.P4TableEntry(
                    "MrcEgress.ecn.port_ecn",
                    match=fy.P4TableMatch(egress_port=port),
                    action=fy.P4TableAction(
                        "MrcEgress.ecn.set_ecn_thresholds", min_qdepth=16, max_qdepth=48
                    ),
                ),
            ]
        )


def delivered(prefix: str) -> int:
    """Packets the sink interfaces of one rig have received."""
    return sum(
        int(Path(f"/sys/class/net/{prefix}h{p}/statistics/rx_packets").read_text())
        for p in SINK_PORTS
    )


def replay_once(pcap: Path, loops: int, prefix: str) -> tuple[int, float]:
    """Offer the pcap at top speed; (packets delivered, seconds from first to last delivery)."""
    base = delivered(prefix)
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
            f"{prefix}h1",
            str(pcap),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    first_t = last_t = None
    first_n = last_n = base
    idle_since = time.monotonic()
    while True:
        now = time.monotonic()
        n = delivered(prefix)
        if n != last_n:
            if first_t is None:
                first_t, first_n = now, last_n
            last_t, last_n, idle_since = now, n, now
        elif replay.poll() is not None and now - idle_since > 1.0:
            break
        time.sleep(0.01)
    _, err = replay.communicate()
    if replay.returncode != 0:
        raise RuntimeError(f"tcpreplay failed: {err.decode().strip()}")
    if first_t is None or last_t is None or last_t <= first_t:
        raise RuntimeError(f"{prefix}: no packets came out of the switch")
    return last_n - first_n, last_t - first_t


def start_rig(lab: NetnsLab, program: str, index: int, log_dir: Path) -> Bmv2Process:
    """One BMv2 running `program` on its own veths (names prefixed by the program's initial)."""
    prefix = program[0]
    ports = {p: f"{prefix}sw{p}" for p in (1, *SINK_PORTS)}
    for port, ifname in ports.items():
        lab.add_veth(ifname, f"{prefix}h{port}")
    opts = Bmv2Options(
        ports=ports,
        device_id=index + 1,
        grpc_port=9559 + index,
        thrift_port=9090 + index,
        log_dir=log_dir,
        cpus=SWITCH_CPU,
    )
    switch = Bmv2Process(opts)
    sw = SyncSwitch(
        opts.grpc_addr,
        BUILD / f"{program}.p4info.txtpb",
        BUILD / f"{program}.json",
        device_id=opts.device_id,
        force_pipeline=True,
    )
    try:
        program_entries(sw, program)
    finally:
        sw.close()
    return switch


def measure_all(
    programs: tuple[str, ...], pcap: Path, loops: int, repeats: int, log_dir: Path
) -> dict[str, dict[str, object]]:
    """Forwarding rate of each program; replays alternate between the programs' switches, so a
    change in the machine's load during the run affects both alike. The median counts.

    Runs inside the benchmark's own namespace (see `main`), where BMv2's gRPC ports are local."""
    samples: dict[str, list[tuple[int, float]]] = {p: [] for p in programs}
    with NetnsLab() as lab:
        switches = [start_rig(lab, program, i, log_dir) for i, program in enumerate(programs)]
        try:
            for _ in range(repeats):
                for program in programs:
                    samples[program].append(replay_once(pcap, loops, program[0]))
        finally:
            for switch in switches:
                switch.stop()
    results: dict[str, dict[str, object]] = {}
    for program, runs in samples.items():
        rates = [count / seconds for count, seconds in runs]
        results[program] = {
            "pps": round(statistics.median(rates), 1),
            "samples_pps": [round(r, 1) for r in rates],
            "delivered": [count for count, _ in runs],
        }
    return results


def run_inside(args: argparse.Namespace) -> dict[str, object]:
    log_dir = Path(tempfile.mkdtemp(prefix="mrc-bench-dp-"))
    pcap = log_dir / "mrc-data.pcap"
    make_pcap(pcap, args.packets)
    results = measure_all(("l3_baseline", "mrc"), pcap, args.loops, args.repeats, log_dir)
    ratio = float(results["mrc"]["pps"]) / float(results["l3_baseline"]["pps"])  # type: ignore[arg-type]
    return {
        "benchmark": "dataplane",
        "baseline": "l3_baseline.p4 (same parser up to UDP, one LPM table)",
        "packets_offered_per_replay": args.packets * args.loops,
        "replays_per_program": args.repeats,
        "l3_baseline": results["l3_baseline"],
        "mrc": results["mrc"],
        "ratio_mrc_to_baseline": round(ratio, 3),
        "target_ratio": 0.7,
        "meets_target": ratio >= 0.7,
        "bmv2_build": bmv2_build_options(),
        "kernel": platform.release(),
        "cpus": {"switch": SWITCH_CPU, "tcpreplay": SENDER_CPU, "online": os.cpu_count()},
        "load_average_at_end": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=20000, help="packets in the pcap")
    parser.add_argument("--loops", type=int, default=10, help="tcpreplay --loop")
    parser.add_argument("--repeats", type=int, default=5, help="replays per program (median)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
        ]
        proc = subprocess.run(
            ["ip", "netns", "exec", ns, *inner],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr, file=sys.stderr)
        return proc.returncode
    print(proc.stdout, end="")
    if args.out:
        args.out.write_text(proc.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
