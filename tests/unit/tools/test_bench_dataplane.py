"""`make bench-dataplane`'s fairness: both programs leave by the same ports, the forwarding
figure neither trims nor marks, the work figure's packets take the full MRC parser path, and a
figure's ratio comes from the repeats' pairs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from scapy.utils import rdpcap

from tools import bench_dataplane as bench
from wire.constants import DscpClass, Opcode
from wire.layers import MrcImmDt, MrcRETH, MrcTSETH


def test_the_baseline_spreads_over_the_same_ports_as_mrc_by_one_host_route_per_port():
    entries = bench.baseline_entries()
    ports = sorted(entry.action.args["port"] for entry in entries)
    assert ports == sorted(bench.SINK_PORTS)
    destinations = {entry.match["ipv4_dst"] for entry in entries}
    assert destinations == {f"{dst}/32" for dst in bench.DESTINATIONS}


def test_the_pcaps_visit_each_destination_equally_often():
    count = 4 * 64
    for kind in ("plain", "full"):
        seen = Counter(bench.packet_fields(kind, i)["dst"] for i in range(count))
        assert set(seen) == set(bench.DESTINATIONS)
        assert len(set(seen.values())) == 1, seen


def test_the_work_group_gives_every_port_the_same_share_of_members():
    ports = bench.member_ports(64)
    assert len(ports) == 64
    assert Counter(ports) == dict.fromkeys(bench.SINK_PORTS, 16)
    assert bench.member_ports(5) == [2, 3, 4, 5, 2]


def test_a_group_without_members_is_refused():
    with pytest.raises(ValueError, match="at least one member"):
        bench.member_ports(0)


def test_the_forwarding_figure_turns_trimming_and_marking_off_and_the_work_figure_on():
    forwarding, work = bench.figures(64)
    assert (forwarding.name, forwarding.packets) == ("forwarding", "plain")
    assert forwarding.members == len(bench.SINK_PORTS)
    assert not forwarding.trim_lookup and not forwarding.ecn_marking
    assert (work.name, work.packets, work.members) == ("program_work", "full", 64)
    assert work.trim_lookup and work.ecn_marking


def test_the_trim_threshold_of_the_work_figure_is_beyond_any_queue():
    assert bench.NEVER_TRIM == 2**19 - 1  # qdepth_t's largest value; BMv2 queues hold 64


def test_full_path_packets_carry_tseth_reth_and_an_immediate_and_some_are_retransmissions(
    tmp_path: Path,
):
    pcap = tmp_path / "full.pcap"
    bench.make_pcap(pcap, 16, "full")
    packets = rdpcap(str(pcap))
    assert len(packets) == 16
    for packet in packets:
        assert packet.haslayer(MrcTSETH)
        assert packet.haslayer(MrcRETH)
        assert packet.haslayer(MrcImmDt)
    opcodes = {bench.packet_fields("full", i)["opcode"] for i in range(16)}
    assert opcodes == {Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST_IMM}
    dscps = Counter(packet["IP"].tos >> 2 for packet in packets)
    assert dscps == {int(DscpClass.TRIMMABLE): 14, int(DscpClass.TRIMMABLE_RETX): 2}


def test_plain_packets_stop_at_reth(tmp_path: Path):
    pcap = tmp_path / "plain.pcap"
    bench.make_pcap(pcap, 4, "plain")
    for packet in rdpcap(str(pcap)):
        assert packet.haslayer(MrcRETH)
        assert not packet.haslayer(MrcTSETH)
        assert not packet.haslayer(MrcImmDt)


def run(pps: float, trimmed: int = 0) -> dict:
    return {"pps": pps, "delivered": 1000, "seconds": 1.0, "trimmed": trimmed}


def test_a_figure_reports_every_pair_and_the_median_paired_ratio():
    forwarding, _ = bench.figures(64)
    runs = {
        bench.BASELINE: [run(100.0), run(110.0), run(90.0), run(100.0)],
        bench.MRC: [run(80.0), run(99.0), run(81.0), run(70.0, trimmed=3)],
    }
    orders = [
        [bench.BASELINE, bench.MRC],
        [bench.MRC, bench.BASELINE],
        [bench.BASELINE, bench.MRC],
        [bench.MRC, bench.BASELINE],
    ]
    result = bench.summarize_figure(forwarding, runs, orders)
    assert [pair["ratio"] for pair in result["pairs"]] == [0.8, 0.9, 0.9, 0.7]
    assert result["ratio_mrc_to_baseline"] == 0.85
    assert result["ratio_spread"]["min"] == 0.7
    assert result["ratio_spread"]["max"] == 0.9
    assert result[bench.BASELINE]["pps"] == 100.0
    assert result[bench.MRC]["pps"] == 80.5
    assert result["trimmed_total"] == 3
    assert result["setup"]["trim_lookup"] is False


def cores(busiest: float) -> dict:
    return {"busiest_core": busiest, "verdict": "CPU-bound" if busiest > 0.8 else "calm"}


def test_a_figure_measured_with_a_saturated_core_says_cpu_bound_beside_its_ratio():
    forwarding, _ = bench.figures(64)
    runs = {
        bench.BASELINE: [{**run(100.0), "cores": cores(0.5)}, {**run(100.0), "cores": cores(1.0)}],
        bench.MRC: [{**run(60.0), "cores": cores(0.6)}, {**run(50.0), "cores": cores(0.7)}],
    }
    orders = [[bench.BASELINE, bench.MRC], [bench.MRC, bench.BASELINE]]
    result = bench.summarize_figure(forwarding, runs, orders)
    assert [pair["cores"] for pair in result["pairs"]] == ["no core saturated", "CPU-bound"]
    assert result["bottleneck"]["verdict"] == "CPU-bound"
    assert result["bottleneck"]["cpu_bound_runs"] == 1
    assert result["summary"].startswith("0.55, CPU-bound (1 of 4 runs")


def test_the_progress_steps_are_the_replays_in_the_counter_balanced_order():
    labels = [step.label for step in bench.steps(repeats=2, members=64)]
    assert labels == [
        "forwarding l3_baseline repeat 0",
        "forwarding mrc repeat 0",
        "program_work l3_baseline repeat 0",
        "program_work mrc repeat 0",
        "program_work mrc repeat 1",
        "program_work l3_baseline repeat 1",
        "forwarding mrc repeat 1",
        "forwarding l3_baseline repeat 1",
    ]
    # a replay lasts what the switch's rate makes it: only the replays made tell
    assert {step.planned_s for step in bench.steps(repeats=2, members=64)} == {None}
