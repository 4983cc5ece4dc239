"""One measurement of each tool: iperf3 UDP and mrc-perf over the veth pair, each side pinned
to its core (the pair's figure with the cores' shares), and the in-process core figure."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from hostenv.proc_stat import read_proc_stat
from tools.cpu_accounting import pinned_cores_busy
from tools.netns_processes import Background, pinned, run_client
from tools.veth_lab import VethPair


def iperf3_udp(pair: VethPair, seconds: float, cores: tuple[int, int], sched: str) -> dict:
    """``iperf3 -u -b 0 -l 1024`` from tx to rx: received goodput and loss."""
    server = pinned(["iperf3", "-s", "-1", "--forceflush", "-B", pair.rx_ip], cores[1], sched)
    with Background(pair.rx_ns, server) as background:
        background.wait_ready("Server listening")
        client = pinned(
            [
                "iperf3",
                "-c",
                pair.rx_ip,
                "-u",
                "-b",
                "0",
                "-l",
                "1024",
                "-t",
                f"{seconds:g}",
                "--json",
            ],
            cores[0],
            sched,
        )
        cpu_before = read_proc_stat()
        report = json.loads(run_client(pair.tx_ns, client, timeout=seconds + 30))
        cpu = pinned_cores_busy(cpu_before, cores)
    end = report.get("end", {})
    if "error" in report or "sum" not in end:
        raise RuntimeError(f"iperf3 gave no result: {report.get('error', 'no summary')}")
    summary = end["sum"]
    received = end.get("sum_received")
    if received is not None:
        goodput = received["bits_per_second"]
    else:  # older iperf3: only the sender's figure and the loss the server reported
        goodput = summary["bits_per_second"] * (1 - summary["lost_percent"] / 100)
    sent = end.get("sum_sent", summary)
    return {
        "goodput_bps": goodput,
        "sent_bps": sent["bits_per_second"],
        "lost_percent": summary["lost_percent"],
        "packets": summary["packets"],
        "seconds": summary["seconds"],
        "cpu_busy": cpu,
    }


def mrc_perf(
    pair: VethPair,
    seconds: float,
    cores: tuple[int, int],
    sched: str,
    evs: int | None = None,
    cc: str | None = None,
) -> dict:
    """``mrc-perf`` from tx to ``mrc-perf --server`` on rx: goodput and what it took."""
    perf = [sys.executable, "-m", "agent.cli.perf_main"]
    server = pinned([*perf, "--server", "--plane", pair.rx_ip], cores[1], sched)
    with Background(pair.rx_ns, server) as background:
        background.wait_ready("server ready")
        command = [*perf, "--to", pair.rx_ip, "--duration", f"{seconds:g}", "--json"]
        command += ["--no-agent", "--plane", pair.tx_ip]
        if evs is not None:
            command += ["--evs", str(evs)]
        if cc is not None:
            command += ["--cc", cc]
        cpu_before = read_proc_stat()
        result = json.loads(run_client(pair.tx_ns, pinned(command, cores[0], sched), 120))
        cpu = pinned_cores_busy(cpu_before, cores)
    connection = result["connection"]
    return {
        "goodput_bps": result["goodput_bps"],
        "seconds": result["seconds"],
        "bytes": result["bytes"],
        "evs": result["evs"],
        "cc": result["cc"],
        "agent_build": result["agent_build"],
        "data_packets_sent": connection["data_packets_sent"],
        "retransmits": connection["retransmits"],
        "timeouts": connection["timeouts"],
        "srtt_s": connection["srtt_s"],
        "min_rtt_s": connection["min_rtt_s"],
        "cwnd_bytes": connection["cwnd_bytes"],
        "ev_states": connection["ev_states"],
        "receiver_drops": result["receiver"].get("drops", {}),
        "cpu_busy": cpu,
    }


def core_benchmark(messages: int) -> dict[str, Any]:
    """Datagrams exchanged per second by two cores on the simulated network (each once)."""
    from agent.sim.bench import run_core_benchmark

    return run_core_benchmark(time.perf_counter, messages=messages).as_dict()
