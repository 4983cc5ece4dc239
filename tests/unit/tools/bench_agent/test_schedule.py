"""The veth benchmark's runs are counter-balanced: phases alternate which goes first from
repeat to repeat, and tools from one phase block to the next."""

from __future__ import annotations

from tools.bench_agent.schedule import run_order

TOOLS = ["iperf3_udp", "mrc_perf"]


def test_phases_alternate_from_repeat_to_repeat_and_tools_from_block_to_block():
    assert [run_order(TOOLS, repeat) for repeat in range(3)] == [
        [("lossless", ["iperf3_udp", "mrc_perf"]), ("lossy", ["mrc_perf", "iperf3_udp"])],
        [("lossy", ["iperf3_udp", "mrc_perf"]), ("lossless", ["mrc_perf", "iperf3_udp"])],
        [("lossless", ["iperf3_udp", "mrc_perf"]), ("lossy", ["mrc_perf", "iperf3_udp"])],
    ]


def test_over_two_repeats_each_side_of_every_comparison_goes_first_once():
    orders = [run_order(TOOLS, repeat) for repeat in range(2)]
    phase_first = [order[0][0] for order in orders]
    assert sorted(phase_first) == ["lossless", "lossy"]
    for phase in ("lossless", "lossy"):
        tool_first = [dict(order)[phase][0] for order in orders]
        assert sorted(tool_first) == TOOLS
