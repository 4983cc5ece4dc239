"""What makes an experiment's comparison fair, without a network: the modes take turns going
first (ABBA) and summary.json says who went first; every mean over seeds has its spread
beside it; each core's load and each link's utilisation name what limited a run, and a ratio
measured with a saturated core is labelled CPU-bound; a comparison the target cannot make
(incast without trimming or ECN) is reported as not applicable instead of as a ratio."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest

from experiments import spray
from experiments.bottleneck import (
    CPU_BOUND,
    LINK_BOUND,
    NEITHER,
    LinkUtilisation,
    RunBottleneck,
    link_utilisation,
    overall_bottleneck,
    phrase,
    run_bottleneck,
)
from experiments.capabilities import TargetFacts, target_facts
from experiments.counters import MEMBER_COUNTERS, PORT_TX_COUNTERS, HopLoad, hop_loads
from experiments.cpu import ProcessTimes, core_load, parse_stat, process_load, process_times
from experiments.experiment import parse_params
from experiments.failover import figures as failover
from experiments.failover.exposure import BYTES, FlowExposure
from experiments.failover.modes import FailoverMode
from experiments.failover.run import FailoverRun, FlowFailure
from experiments.incast import figures as incast
from experiments.incast.modes import Fabric
from experiments.incast.run import IncastRun
from experiments.json_form import to_json
from experiments.placements import CutChoice
from experiments.plan import plan_bring_ups, run_order, seed_orders
from experiments.records import CutFailure, Run
from experiments.registry import EXPERIMENTS
from experiments.spray import SprayRun
from experiments.stats import Spread, describe, seed_pairs, spread_problems
from tests.unit.experiments.run_records import cpu, measured, run_verdict, transfer
from topologies import load_topology


def spread(name: str, values: list[float | None]) -> dict[str, Any]:
    """The spread of ``values`` as summary.json writes it under ``name``."""
    written = to_json(Spread.of(values))
    assert isinstance(written, dict)
    return {f"{name}_{key}": value for key, value in written.items()}


# -- order ---------------------------------------------------------------------------------


def test_modes_take_turns_going_first_seed_by_seed() -> None:
    assert run_order(("a", "b"), 4) == [
        (0, "a"),
        (0, "b"),
        (1, "b"),
        (1, "a"),
        (2, "a"),
        (2, "b"),
        (3, "b"),
        (3, "a"),
    ]
    assert seed_orders(("a", "b"), 3) == {"0": ["a", "b"], "1": ["b", "a"], "2": ["a", "b"]}


def test_modes_on_one_network_share_one_bring_up_whatever_their_order() -> None:
    spray_ = EXPERIMENTS["spray"]
    (only,) = plan_bring_ups(spray_, parse_params(spray_, {"transports": "mrc,single"}), seeds=3)
    assert only.runs == (
        (0, "mrc"),
        (0, "single"),
        (1, "single"),
        (1, "mrc"),
        (2, "mrc"),
        (2, "single"),
    )


def test_modes_on_two_networks_share_a_bring_up_where_the_order_puts_them_side_by_side() -> None:
    incast_ = EXPERIMENTS["incast"]
    plan = plan_bring_ups(incast_, parse_params(incast_, {}), seeds=3)
    on, off = "-ecn_trim_on", "-ecn_trim_off"
    # ON | OFF OFF | ON ON | OFF: seeds + 1 bring-ups, not one per run
    assert [(b.suffix, b.runs) for b in plan] == [
        (on, ((0, "ecn_trim_on"),)),
        (off, ((0, "ecn_trim_off"), (1, "ecn_trim_off"))),
        (on, ((1, "ecn_trim_on"), (2, "ecn_trim_on"))),
        (off, ((2, "ecn_trim_off"),)),
    ]


@dataclass(frozen=True)
class _Figure:
    x: float
    transfers: dict[str, Any] = dataclasses.field(default_factory=dict)


def test_each_seeds_pair_lists_its_modes_in_the_order_they_ran() -> None:
    runs = {
        "mrc": {0: measured(_Figure(1.0), sequence=0), 1: measured(_Figure(2.0), sequence=3)},
        "single": {0: measured(_Figure(3.0), sequence=1), 1: measured(_Figure(4.0), sequence=2)},
    }
    assert to_json(seed_pairs(runs, {"x": lambda run: run.record.x})) == [
        {"seed": "0", "order": ["mrc", "single"], "x": {"mrc": 1.0, "single": 3.0}},
        {"seed": "1", "order": ["single", "mrc"], "x": {"mrc": 2.0, "single": 4.0}},
    ]


# -- spread --------------------------------------------------------------------------------


def test_a_mean_comes_with_min_max_stdev_and_the_seeds_that_gave_a_value() -> None:
    figures = spread("recovery_s", [0.6, None, 0.2, 0.1])
    assert figures["recovery_s_mean"] == pytest.approx(0.3)
    assert (figures["recovery_s_min"], figures["recovery_s_max"]) == (0.1, 0.6)
    # sample stdev of 0.6, 0.2, 0.1 around 0.3: sqrt((0.09 + 0.01 + 0.04) / 2)
    assert figures["recovery_s_stdev"] == pytest.approx(0.07**0.5)
    assert figures["recovery_s_seeds"] == 3
    assert spread("x", [2.0])["x_stdev"] is None  # one value has no spread
    assert spread("x", [None, None]) == {
        "x_mean": None,
        "x_min": None,
        "x_max": None,
        "x_stdev": None,
        "x_seeds": 0,
    }


def test_a_figure_reads_as_mean_min_max_over_the_seeds() -> None:
    def seconds(v: float) -> str:
        return f"{v:.2f}"

    assert describe(Spread.of([0.1, 0.3]), seconds, 2, "s") == "0.20 s (0.10-0.30) over 2 seeds"
    assert describe(Spread.of([0.1, None, 0.3]), seconds, 3, "s") == (
        "0.20 s (0.10-0.30) over 2 seeds of 3"
    )
    assert describe(Spread.of([0.5]), seconds, 1, "s") == "0.50 s (1 seed)"
    assert describe(Spread.of([0.5, None]), seconds, 2) == "0.50 (1 seed of 2)"
    assert describe(Spread.of([None]), seconds, 1) == "- (no value in 1 seed(s))"


def test_a_mean_without_its_spread_makes_figures_ill_formed() -> None:
    figures = {"ratio_mean": 1.0, "mrc": {"goodput_mean": 2.0, **spread("x", [1.0])}}
    assert spread_problems(figures) == [
        "figures.ratio_mean has no spread beside it: lacks "
        "['ratio_min', 'ratio_max', 'ratio_stdev', 'ratio_seeds']",
        "figures.mrc.goodput_mean has no spread beside it: lacks "
        "['goodput_min', 'goodput_max', 'goodput_stdev', 'goodput_seeds']",
    ]


# -- CPU -----------------------------------------------------------------------------------

STAT_BEFORE = """cpu  300 0 100 600 0 0 0 0 0 0
cpu0 100 0 50 300 0 0 0 0 0 0
cpu1 200 0 50 300 0 0 0 0 0 0
intr 1 2 3
"""
# Over the interval: cpu0 busy 90 of 100 jiffies (10 of them stolen, 20 in softirq); cpu1
# busy 30 of 100 (iowait counts as idle, and so do 40 jiffies of background, niced work).
STAT_AFTER = """cpu  370 40 120 630 10 0 20 10 0 0
cpu0 150 0 60 310 0 0 20 10 0 0
cpu1 220 40 60 320 10 0 0 0 0 0
"""


def test_each_core_is_read_apart_steal_counts_as_busy_and_niced_work_does_not() -> None:
    load = core_load(parse_stat(STAT_BEFORE), parse_stat(STAT_AFTER))
    assert load["cores"]["cpu0"] == pytest.approx(
        {"busy": 0.9, "softirq": 0.2, "steal": 0.1, "nice": 0.0}
    )
    assert load["cores"]["cpu1"] == pytest.approx(
        {"busy": 0.3, "softirq": 0.0, "steal": 0.0, "nice": 0.4}
    )
    assert load["busiest_core"] == pytest.approx(0.9)
    assert load["busy_fraction"] == pytest.approx(0.6)
    assert load["cpus"] == 2


def test_the_runs_own_processes_are_told_from_kernel_threads_and_the_machines_other_load() -> None:
    start = {
        10: ProcessTimes(ppid=1, jiffies=1000, command="python -m experiments spray"),
        11: ProcessTimes(ppid=10, jiffies=0, command="simple_switch_grpc"),
        30: ProcessTimes(ppid=2, jiffies=5, command="[ksoftirqd/0]"),
        40: ProcessTimes(ppid=1, jiffies=100, command="cc1plus"),
        50: ProcessTimes(ppid=1, jiffies=7, command="sleep 100"),
        60: ProcessTimes(ppid=1, jiffies=0, command="make -j2", nice=10),
    }
    end = {
        10: ProcessTimes(ppid=1, jiffies=1010, command="python -m experiments spray"),
        11: ProcessTimes(ppid=10, jiffies=60, command="simple_switch_grpc"),
        12: ProcessTimes(ppid=11, jiffies=30, command="a grandchild started in the window"),
        30: ProcessTimes(ppid=2, jiffies=25, command="[ksoftirqd/0]"),
        40: ProcessTimes(ppid=1, jiffies=180, command="cc1plus"),
        50: ProcessTimes(ppid=1, jiffies=7, command="sleep 100"),
        60: ProcessTimes(ppid=1, jiffies=50, command="make -j2", nice=10),
    }
    load = process_load(start, end, core_jiffies=100.0, root=10)
    assert load["run_cores"] == pytest.approx((10 + 60 + 30) / 100)
    assert load["kernel_threads_cores"] == pytest.approx(0.2)
    assert load["background_cores"] == pytest.approx(0.5)  # niced: yields to the run
    assert load["others_cores"] == pytest.approx(0.8)
    # an idle process is not among the busiest others
    assert load["top_others"] == [{"pid": 40, "command": "cc1plus", "cores": pytest.approx(0.8)}]


def test_this_process_is_found_among_the_machines_processes() -> None:
    import os

    processes = process_times()
    assert processes[os.getpid()].ppid == os.getppid()
    assert "pytest" in processes[os.getpid()].command or "python" in processes[os.getpid()].command


# -- link utilisation ----------------------------------------------------------------------


def _member_status(packets: dict[str, dict[int, tuple[int, int]]]) -> dict[str, Any]:
    """bmv2-like: member i of every switch forwards out of port i; (packets, bytes)."""
    return {
        "groups": {
            sw: [{"members": [{"member_index": p, "port": p} for p in ports]}]
            for sw, ports in packets.items()
        },
        "counters": {
            sw: {"members": {str(p): {"packets": n, "bytes": b} for p, (n, b) in ports.items()}}
            for sw, ports in packets.items()
        },
    }


def test_each_direction_of_a_link_is_what_its_sending_switch_forwarded_onto_it() -> None:
    topology = load_topology("leaf-spine")  # l1 port 3 <-> s1 port 1
    before = _member_status({"l1": {3: (10, 1000)}, "s1": {1: (0, 0)}})
    after = _member_status({"l1": {3: (60, 51000)}, "s1": {1: (5, 300)}})
    loads = hop_loads(topology, before, after)
    assert loads["l1:3->s1"] == HopLoad("l1:3<->s1:1", MEMBER_COUNTERS, 50, 50000)
    assert loads["s1:1->l1"] == HopLoad("l1:3<->s1:1", MEMBER_COUNTERS, 5, 300)
    assert loads["l2:3->s1"] is None  # l2's counters were not in the snapshots


def test_a_kernel_switch_direction_carries_its_ports_tx_bytes() -> None:
    topology = load_topology("leaf-spine")

    def port_tx(packets: int, octets: int) -> dict[str, Any]:
        return {
            "groups": {},
            "counters": {
                "l1": {
                    "ports": {"3": {"tx_packets": packets, "tx_bytes": octets}},
                    "members": {},
                    "not_counted": ["members: the kernel keeps no per-next-hop counters"],
                }
            },
        }

    loads = hop_loads(topology, port_tx(0, 0), port_tx(7, 7000))
    assert loads["l1:3->s1"] == HopLoad("l1:3<->s1:1", PORT_TX_COUNTERS, 7, 7000)


def _slowed(rate_pps: int) -> Any:
    """leaf-spine with every fabric link at ``rate_pps`` (0: unshaped, 1000 Mbit/s nominal)."""
    import dataclasses

    topology = load_topology("leaf-spine")
    links = tuple(
        dataclasses.replace(link, params=dataclasses.replace(link.params, queue_rate_pps=rate_pps))
        for link in topology.links
    )
    return dataclasses.replace(topology, links=links)


def test_link_utilisation_counts_bytes_against_the_rate_in_full_data_frames() -> None:
    from hostenv.tbf import tbf_parameters

    # the kernel's tbf for 100 packets/s passes this many bytes a second: the same limit
    rate_bytes = tbf_parameters(100, 32).rate_bits_per_s / 8
    load = HopLoad("l1:3<->s1:1", PORT_TX_COUNTERS, packets=2000, byte_count=int(rate_bytes * 5))
    (entry,) = to_json(link_utilisation(_slowed(100), {"l1:3->s1": load}, 10.0)).values()
    assert entry is not None and entry["utilisation"] == pytest.approx(0.5)


def test_small_control_packets_weigh_their_bytes_not_a_full_packet_each() -> None:
    # BMv2: 500 data frames and 500 ACKs in 10 s on a 100 packets/s link; the ACKs take the
    # unlimited high-priority queue, so the data queue was half busy, not fully
    from hostenv.tbf import FRAME_BYTES

    ack_bytes = 64
    carried = 500 * FRAME_BYTES + 500 * ack_bytes
    load = HopLoad("l1:3<->s1:1", MEMBER_COUNTERS, packets=1000, byte_count=carried)
    (entry,) = to_json(link_utilisation(_slowed(100), {"l1:3->s1": load}, 10.0)).values()
    assert entry is not None
    assert entry["utilisation"] == pytest.approx(0.5 + 0.5 * ack_bytes / FRAME_BYTES)
    assert entry["limit"] == f"100 packets/s of {FRAME_BYTES} bytes"


def test_an_unshaped_link_is_measured_against_its_nominal_bandwidth() -> None:
    load = HopLoad("l1:3<->s1:1", PORT_TX_COUNTERS, packets=1, byte_count=125_000_000)
    utilisation = to_json(link_utilisation(_slowed(0), {"l1:3->s1": load, "x": None}, 2.0))
    entry = utilisation["l1:3->s1"]
    assert entry is not None
    assert entry["utilisation"] == pytest.approx(0.5)  # 1 Gbit over 2 s at 1000 Mbit/s
    assert "nominal" in entry["limit"]
    assert utilisation["x"] is None


# -- verdicts ------------------------------------------------------------------------------


def _links(*shares: float | None) -> dict[str, LinkUtilisation | None]:
    return {
        f"hop{i}": None
        if share is None
        else LinkUtilisation(f"link{i}", PORT_TX_COUNTERS, 0, None, "", share)
        for i, share in enumerate(shares)
    }


def test_one_saturated_core_makes_a_run_cpu_bound_whatever_the_average_or_the_links() -> None:
    verdict = to_json(run_bottleneck(cpu(0.85, 0.5), _links(0.95, 0.2)))
    assert verdict["verdict"] == CPU_BOUND
    assert verdict["busiest_link"] == "hop0"


def test_a_saturated_link_with_cores_to_spare_makes_a_run_link_bound() -> None:
    verdict = to_json(run_bottleneck(cpu(0.6), _links(0.3, 0.85, None)))
    assert verdict == {
        "verdict": LINK_BOUND,
        "busiest_core": 0.6,
        "busiest_link": "hop1",
        "busiest_link_utilisation": 0.85,
        "links_unread": 1,
        "other_processes_cores": None,
        "busiest_other_process": None,
    }
    assert to_json(run_bottleneck(cpu(0.6), _links(0.3)))["verdict"] == NEITHER
    assert to_json(run_bottleneck(cpu(0.6), _links(None)))["verdict"] == NEITHER


def _verdict(name: str, core: float = 0.5, link: float = 0.5) -> RunBottleneck:
    return run_verdict(name, core, link)


def test_a_cpu_bound_verdict_names_the_other_processes_that_took_the_cores() -> None:
    busy_machine = dataclasses.replace(
        _verdict(CPU_BOUND, core=0.99),
        other_processes_cores=1.2,
        busiest_other_process="cc1plus",
    )
    text = phrase(overall_bottleneck([busy_machine, _verdict(CPU_BOUND, core=0.9)]))
    assert text.startswith("CPU-bound: 2 of 2 run(s) had a core above 80 % busy (busiest 99 %")
    assert "other processes on the machine took up to 1.20 cores, most 'cc1plus'" in text
    assert text.endswith("not a link measure")
    quiet = phrase(overall_bottleneck([_verdict(CPU_BOUND, core=0.9)]))
    assert "other processes" not in quiet


def test_one_cpu_bound_run_makes_the_figure_over_all_runs_cpu_bound() -> None:
    overall = to_json(
        overall_bottleneck(
            [_verdict(LINK_BOUND, link=0.9), _verdict(CPU_BOUND, core=0.97), _verdict(LINK_BOUND)]
        )
    )
    assert overall["verdict"] == CPU_BOUND
    assert (overall["runs"], overall["cpu_bound_runs"], overall["link_bound_runs"]) == (3, 1, 2)
    assert overall["busiest_core_max"] == 0.97 and overall["busiest_link_utilisation_max"] == 0.9
    assert to_json(overall_bottleneck([_verdict(LINK_BOUND)] * 2))["verdict"] == LINK_BOUND
    assert (
        to_json(overall_bottleneck([_verdict(LINK_BOUND), _verdict(NEITHER)]))["verdict"] == NEITHER
    )


# -- spray's ratio and failover's recovery over seeds ----------------------------------------


def _spray_run(goodput: float, sequence: int, verdict: str, core: float) -> Run[SprayRun]:
    record = SprayRun(
        transfers={},
        evs=1,
        aggregate_goodput_bps=goodput,
        link_packets={},
        link_counters=(MEMBER_COUNTERS,),
        link_packets_max=10,
        link_packets_min=1,
        links_unread=(),
    )
    return measured(record, sequence, _verdict(verdict, core=core), cpu(core, core - 0.1))


BMV2 = target_facts("bmv2", None)


def test_spray_labels_its_ratio_cpu_bound_when_a_run_saturated_a_core() -> None:
    runs = {
        "mrc": {0: _spray_run(3e6, 0, CPU_BOUND, 0.95), 1: _spray_run(4e6, 3, LINK_BOUND, 0.7)},
        "single": {
            0: _spray_run(2e6, 1, LINK_BOUND, 0.6),
            1: _spray_run(2e6, 2, LINK_BOUND, 0.6),
        },
    }
    summary = spray.summarize(runs, BMV2)
    figures = to_json(summary)
    assert figures["goodput_ratio_mrc_over_single"] == [1.5, 2.0]
    assert (figures["goodput_ratio_mean"], figures["goodput_ratio_min"]) == (1.75, 1.5)
    assert figures["goodput_ratio_max"] == 2.0 and figures["goodput_ratio_seeds"] == 2
    assert figures["goodput_ratio_bottleneck"] == CPU_BOUND
    assert [pair["order"] for pair in figures["pairs"]] == [["mrc", "single"], ["single", "mrc"]]
    assert figures["mrc"]["busiest_core_max"] == 0.95
    assert spread_problems(figures) == []
    (ratio_line, *_) = spray.text(summary)
    assert ratio_line.startswith("aggregate goodput MRC / single: 1.75 (1.50-2.00) over 2 seeds")
    assert "[CPU-bound: 1 of 4 run(s) had a core above 80 % busy" in ratio_line
    assert "not a link measure" in ratio_line


def test_spray_presents_a_ratio_of_link_bound_runs_as_link_bound() -> None:
    runs = {
        "mrc": {0: _spray_run(3e6, 0, LINK_BOUND, 0.6)},
        "single": {0: _spray_run(2e6, 1, LINK_BOUND, 0.5)},
    }
    summary = spray.summarize(runs, BMV2)
    figures = to_json(summary)
    assert figures["goodput_ratio_bottleneck"] == LINK_BOUND
    assert "[link-bound: busiest link" in spray.text(summary)[0]


def _failover_run(
    mode: str, recovery: float | None, sequence: int, failed_at: float | None = None
) -> Run[FailoverRun]:
    flow = transfer()
    failed = ()
    if failed_at is not None:
        flow = transfer(
            completed=False,
            lost=None,
            goodput_bps=0.0,
            failure=CutFailure("retries exhausted", failed_at_s=failed_at),
        )
        failed = (FlowFailure("h1->h3", "retries exhausted", failed_at, failed_at - 5.0),)
    record = FailoverRun(
        mode=FailoverMode.parse(mode),
        evs=None,
        flows=("h1->h3",),
        transfers={"h1->h3": flow},
        cut="s1:2-l2",
        cut_link="s1:2-l2",
        cut_switch=None,
        cut_links=("s1:2<->l2:3",),
        switch_dark=None,
        cut_probe_packets=1,
        cut_counters=MEMBER_COUNTERS,
        cut_choice=CutChoice.BUSIEST,
        exposure={"h1->h3": FlowExposure(True, 1.0, 1, BYTES, ("l2",))},
        exposed=True,
        cut_s=5.0,
        cut_error=None,
        uncut=None,
        restore_s=8.0,
        switch_back_s=None,
        recovery_s=recovery,
        longest_stall_s=0.1 if failed_at is None else failed_at - 5.0,
        bytes_lost=flow.bytes_lost,
        completed=flow.completed,
        failed=failed,
        problems=(),
    )
    return measured(record, sequence, _verdict(NEITHER))


def test_failover_gives_each_modes_recovery_as_mean_and_spread_and_each_seeds_pair() -> None:
    mrc, roce = "mrc-static-remote", "roce-static-remote"
    runs = {
        FailoverMode.parse(mrc): {
            0: _failover_run(mrc, 0.6, 0),
            1: _failover_run(mrc, 0.06, 3),
            2: _failover_run(mrc, 0.09, 4),
        },
        FailoverMode.parse(roce): {
            0: _failover_run(roce, 0.08, 1),
            1: _failover_run(roce, None, 2, failed_at=5.5),
            2: _failover_run(roce, 0.18, 5),
        },
    }
    summary = failover.summarize(runs, BMV2)
    figures = to_json(summary)
    assert figures[mrc]["recovery_s_mean"] == pytest.approx(0.25)
    assert (figures[mrc]["recovery_s_min"], figures[mrc]["recovery_s_max"]) == (0.06, 0.6)
    assert figures[roce]["recovery_s_seeds"] == 2  # one seed never recovered
    assert (figures[mrc]["transport"], figures[mrc]["routing"]) == ("mrc", "static")
    assert figures[roce]["bytes_lost_unknown"] == 1 and not figures[roce]["completed"]
    assert figures[roce]["failed_after_cut_s_mean"] == pytest.approx(0.5)
    assert figures["pairs"][1] == {
        "seed": "1",
        "order": [roce, mrc],
        "recovery_s": {mrc: 0.06, roce: None},
        "longest_stall_s": {mrc: 0.1, roce: 0.5},
        "goodput_bps": {mrc: 8e6, roce: 0.0},
    }
    assert spread_problems(figures) == []
    lines = failover.text(summary)
    assert "0.25 s (0.06-0.60) over 3 seeds" in lines[0]
    assert f"{roce}: back to 90 % after the cut: 0.13 s (0.08-0.18) over 2 seeds of 3" in lines[1]
    assert f"{roce}: failed in 1 transfer(s), 0.50 s (1 seed) after the cut" in lines[2]
    assert f"seed 1 ({roce} then {mrc}): {mrc} 0.06 s, {roce} never" in lines


# -- comparisons a target cannot make ------------------------------------------------------

NO_ECN_KERNEL = {"pfifo": True, "tbf": True, "htb": True, "red": False, "codel": False}


def test_bmv2_trims_and_marks_and_lacks_nothing() -> None:
    bmv2 = target_facts("bmv2", None)
    assert bmv2 == TargetFacts(
        "bmv2",
        trimming=True,
        ecn_marking=True,
        ecn_by="mrc.p4",
        roce_class="lossless class: no congestion drops; pause frames (PFC) not modelled; "
        "ECN marking by mrc.p4 on fabric ports, so DCQCN acts",
    )


def test_a_kernel_switch_never_trims_and_marks_only_with_red_or_codel() -> None:
    bare = target_facts("linux", NO_ECN_KERNEL)
    assert (bare.trimming, bare.ecn_marking, bare.ecn_by) == (False, False, None)
    assert any("no packet trimming" in line for line in bare.lacks)
    assert any("no ECN marking" in line for line in bare.lacks)
    assert bare.roce_class.startswith("no lossless RoCE class")
    assert bare.roce_class.endswith("so DCQCN never acts")
    red = target_facts("linux", {**NO_ECN_KERNEL, "red": True})
    assert (red.trimming, red.ecn_marking, red.ecn_by) == (False, True, "red")
    assert target_facts("linux", None).ecn_marking is None  # not probed: unknown, not "no"


def _incast_run(completion: float, shortfall: float, sequence: int) -> Run[IncastRun]:
    record = IncastRun(
        transfers={"victim": transfer(goodput_bps=1e6)},
        evs=256,
        victim="victim",
        shared_hops=("s1->l1",),
        incast_start_s=3.0,
        incast_end_s=3.0 + completion,
        incast_completion_s=completion,
        incast_transfer_seconds={},
        victim_goodput_bps=2e6,
        victim_goodput_bps_before=3e6,
        victim_goodput_bps_during=1e6,
        victim_shortfall_bytes=shortfall,
        switch_signals={"trims": None, "ecn_marks": None},
    )
    return measured(record, sequence, _verdict(LINK_BOUND))


INCAST_RUNS = {
    Fabric.ECN_TRIM_ON: {0: _incast_run(4.0, 700e3, 0), 1: _incast_run(6.0, 900e3, 3)},
    Fabric.ECN_TRIM_OFF: {0: _incast_run(10.0, 1400e3, 1), 1: _incast_run(14.0, 1800e3, 2)},
}


def test_incast_compares_on_and_off_where_the_target_trims_and_marks() -> None:
    summary = incast.summarize(INCAST_RUNS, BMV2)
    figures = to_json(summary)
    assert figures["on_off_comparison"]["applicable"]
    assert figures["on_off_comparison"]["reason"] is None
    assert figures["incast_completion_off_over_on"] == pytest.approx(12.0 / 5.0)
    assert figures["victim_shortfall_off_over_on"] == pytest.approx(1600 / 800)
    assert figures["ecn_trim_on"]["incast_completion_s_min"] == 4.0
    assert spread_problems(figures) == []
    assert "on / off: victim goodput" in incast.text(summary)[-1]


def test_incast_on_a_target_with_nothing_to_switch_makes_no_on_off_comparison() -> None:
    summary = incast.summarize(INCAST_RUNS, target_facts("linux", NO_ECN_KERNEL))
    figures = to_json(summary)
    comparison = figures["on_off_comparison"]
    assert not comparison["applicable"]
    assert comparison["reason"] == "not applicable: no trimming or ECN on this target/kernel"
    assert comparison["lacked"] == ["trimming", "ECN marking"]
    assert any("no packet trimming" in line for line in comparison["target_lacks"])
    for ratio in (
        "incast_completion_off_over_on",
        "victim_shortfall_off_over_on",
        "victim_during_incast_on_over_off",
    ):
        assert figures[ratio] is None
    # each fabric's own figures stay: they are measurements, only the comparison is not made
    assert figures["ecn_trim_off"]["incast_completion_s_mean"] == 12.0
    last = incast.text(summary)[-1]
    assert last.startswith("on / off: not applicable: no trimming or ECN on this target/kernel")
    assert "x" not in last.split("(")[0]  # no ratio


def test_incast_on_a_kernel_with_red_compares_ecn_alone_and_says_so() -> None:
    summary = incast.summarize(INCAST_RUNS, target_facts("linux", {**NO_ECN_KERNEL, "red": True}))
    figures = to_json(summary)
    comparison = figures["on_off_comparison"]
    assert comparison["applicable"] and comparison["compares"] == ["ECN marking"]
    assert comparison["reason"] == "ECN marking only: no trimming on this target/kernel"
    assert figures["incast_completion_off_over_on"] == pytest.approx(12.0 / 5.0)
    assert "(ECN marking only: no trimming on this target/kernel)" in incast.text(summary)[-1]


def test_an_incast_runs_progress_figure_is_the_victims_goodput_and_the_completion():
    run = _incast_run(4.0, 700e3, 0).record
    assert incast.headline(run) == (
        "victim goodput 3.000 Mbit/s before, 1.000 Mbit/s during the incast; "
        "incast completion 4.00 s"
    )
    never = dataclasses.replace(run, incast_completion_s=None, victim_goodput_bps_during=None)
    assert incast.headline(never).endswith("unmeasured during the incast; incast completion never")
