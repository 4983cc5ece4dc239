"""The veth figure's progress steps are its runs in the order they are made: per repeat, each
phase block of :func:`run_order` with its tools, each ``--duration`` long; and the core figure's
rate is its step's figure."""

from __future__ import annotations

from tools.bench_agent.cli import core_figure, parse_args
from tools.bench_agent.veth import veth_steps


def test_the_steps_are_the_runs_in_the_counter_balanced_order_each_its_duration_long():
    steps = veth_steps(parse_args(["--repeat", "2", "--duration", "3"]))
    assert [step.label for step in steps] == [
        "iperf3_udp lossless repeat 0",
        "mrc_perf lossless repeat 0",
        "mrc_perf lossy repeat 0",
        "iperf3_udp lossy repeat 0",
        "iperf3_udp lossy repeat 1",
        "mrc_perf lossy repeat 1",
        "mrc_perf lossless repeat 1",
        "iperf3_udp lossless repeat 1",
    ]
    assert {step.planned_s for step in steps} == {3.0}


def test_single_path_adds_its_runs_to_every_phase_block():
    steps = veth_steps(parse_args(["--repeat", "1", "--single-path"]))
    assert len(steps) == 6
    assert sum(step.label.startswith("mrc_perf_single_path ") for step in steps) == 2


def test_the_core_figures_step_says_its_rate():
    assert core_figure({"packets_per_second": 12617.4}) == "12617 datagrams/s"
