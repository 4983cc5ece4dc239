"""The experiments' pure parts, without a network: transfer figures, recovery time, the
permutation, link loads from member counters, switch trims and ECN marks, parameters,
topology variants (ECN and trimming off, slowed host queues), which links flows share, how
modes map to bring-ups, summary checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.__main__ import EXIT_UNAVAILABLE, EXIT_USAGE
from experiments.__main__ import main as experiments_main
from experiments.counters import (
    MEMBER_COUNTERS,
    PORT_TX_COUNTERS,
    CountersUnavailable,
    busiest_uplink,
    congestion_signals,
    link_loads,
)
from experiments.experiment import parse_params
from experiments.incast.modes import shared_hops
from experiments.json_form import to_json
from experiments.metrics import recovery_time, shortfall_bytes, transfer_metrics, window_goodput
from experiments.paths import fabric_hops
from experiments.plan import bring_ups
from experiments.registry import EXPERIMENTS
from experiments.results import TRANSFER_FIELDS, summary_problems
from experiments.spray import permutation
from experiments.topology_variant import HostQueue, Variant, write_variant
from topologies import load_topology


def _perf_result(posted: int, acked: int, received: int, size: int = 1000) -> dict[str, Any]:
    return {
        "message_size": size,
        "goodput_bps": 8e6,
        "connection": {
            "messages_posted": posted,
            "messages_acked": acked,
            "messages_failed": 0,
            "retransmits": {"nack": 1, "sack_gap": 2, "timeout": 3},
            "retransmits_total": 6,
        },
        "receiver": {"bytes_received": received * size, "messages_received": received},
    }


def test_a_transfer_whose_every_message_arrived_completed_and_lost_nothing() -> None:
    metrics = to_json(transfer_metrics(_perf_result(posted=10, acked=10, received=10)))
    assert metrics["bytes_sent"] == metrics["bytes_delivered"] == 10_000
    assert metrics["bytes_lost"] == 0 and metrics["completed"]
    assert metrics["retransmits"] == {"nack": 1, "sack_gap": 2, "timeout": 3}


def test_a_message_never_delivered_counts_as_lost_and_not_completed() -> None:
    metrics = to_json(transfer_metrics(_perf_result(posted=10, acked=9, received=9)))
    assert metrics["bytes_lost"] == 1000 and not metrics["completed"]


def _series(values: list[float], bin_s: float = 0.1) -> list[dict[str, float]]:
    return [{"t_s": (i + 1) * bin_s, "goodput_bps": v} for i, v in enumerate(values)]


def test_recovery_is_measured_to_the_end_of_the_first_window_back_at_90_percent() -> None:
    # level 10 until the cut at 1.0 s, zero for 0.5 s, then back at 10
    series = _series([10.0] * 10 + [0.0] * 5 + [10.0] * 10)
    assert recovery_time(series, cut_s=1.0, baseline_from_s=0.0) == pytest.approx(0.6)


def test_goodput_that_never_comes_back_has_no_recovery_time() -> None:
    series = _series([10.0] * 10 + [5.0] * 20)
    assert recovery_time(series, cut_s=1.0, baseline_from_s=0.0) is None


def test_one_lucky_bin_is_not_a_recovery() -> None:
    series = _series([10.0] * 10 + [0.0, 10.0, 0.0, 0.0] + [10.0] * 5)
    assert recovery_time(series, cut_s=1.0, baseline_from_s=0.0) == pytest.approx(0.5)


@pytest.mark.parametrize("seed", range(5))
def test_the_spray_permutation_sends_everyone_once_and_never_within_a_leaf(seed: int) -> None:
    topology = load_topology("leaf-spine-4x4")
    leaf = {host.name: host.nics[0].switch for host in topology.hosts}
    pairs = permutation(topology, seed)
    assert sorted(s for s, _ in pairs) == sorted(leaf) == sorted(d for _, d in pairs)
    assert all(leaf[s] != leaf[d] for s, d in pairs)
    assert permutation(topology, seed) == pairs  # the seed fixes the draw


def _status(packets: dict[str, dict[int, int]]) -> dict[str, Any]:
    """A controller status with member ``i`` of every switch forwarding out of port ``i``."""
    return {
        "groups": {
            sw: [{"members": [{"member_index": p, "port": p} for p in ports]}]
            for sw, ports in packets.items()
        },
        "counters": {
            sw: {"members": {str(p): {"packets": n, "bytes": 0} for p, n in ports.items()}}
            for sw, ports in packets.items()
        },
    }


def test_the_busiest_uplink_is_the_member_that_forwarded_most_in_between() -> None:
    topology = load_topology("leaf-spine")  # l1 ports 3..6 go to s1..s4
    before = _status({"l1": {1: 0, 3: 100, 4: 100, 5: 100, 6: 100}})
    after = _status({"l1": {1: 999, 3: 110, 4: 900, 5: 120, 6: 100}})
    assert busiest_uplink(topology, "l1", before, after) == ("s2", 4, 800, MEMBER_COUNTERS)


def test_link_load_adds_both_ends_and_is_unknown_where_counters_were_not_read() -> None:
    topology = load_topology("leaf-spine")
    zero = {"l1": {3: 0}, "s1": {1: 0}, "l2": {3: 0}, "s2": {}}
    before = _status(zero)
    after = _status({"l1": {3: 5}, "s1": {1: 7}, "l2": {3: 1}, "s2": {}})
    after["counters"]["s2"] = {"error": "timed out"}
    loads = link_loads(topology, before, after)
    assert loads.packets["l1:3<->s1:1"] == 12
    assert loads.packets["l2:3<->s1:2"] == 1
    assert loads.packets["l1:4<->s2:1"] is None
    assert loads.sources == (MEMBER_COUNTERS,)
    unread_l1 = after | {"counters": {"l1": {"error": "timed out"}}}
    with pytest.raises(CountersUnavailable, match=r"l1: counters unavailable \(timed out\)"):
        busiest_uplink(topology, "l1", before, unread_l1)


def test_parameters_are_typed_checked_and_unknown_ones_refused() -> None:
    failover = EXPERIMENTS["failover"]
    params = parse_params(failover, {"duration_s": "8", "cut_at_s": "2", "restore_at_s": "4"})
    assert (params.duration_s, params.cut_at_s, params.restore_at_s) == (8.0, 2.0, 4.0)
    with pytest.raises(ValueError, match="no parameter 'speed'"):
        parse_params(failover, {"speed": "1"})
    with pytest.raises(ValueError, match="expected int"):
        parse_params(failover, {"mrc_evs": "many"})
    with pytest.raises(ValueError, match="cut_at_s < restore_at_s"):
        parse_params(failover, {"cut_at_s": "15"})


def test_a_variant_slows_only_fabric_links_and_stays_a_valid_topology(tmp_path: Path) -> None:
    variant = Variant(
        fabric_rate_pps=100,
        fabric_queue_depth=32,
        trim_threshold=24,
        ecn_thresholds=(8, 20),
        lldp_interval_ms=100,
    )
    topology = load_topology(str(write_variant("leaf-spine", variant, tmp_path)))
    assert {link.params.queue_rate_pps for link in topology.links} == {100}
    assert {link.params.queue_rate_pps for link in topology.host_links} == {0}
    assert topology.settings.trim_threshold == 24
    assert topology.settings.lldp.interval_ms == 100


def _run_records(transfers: dict[str, Any], sequence: int = 0) -> dict[str, Any]:
    """A run as the runner records it: the experiment's transfers and the runner's own
    records of what limited it and where it stood in the order."""
    return {
        "transfers": transfers,
        "cpu": {"cores": {}, "busiest_core": 0.5, "busy_fraction": 0.5},
        "link_utilisation": {},
        "window_s": 1.0,
        "bottleneck": {"verdict": "neither saturated"},
        "sequence": sequence,
    }


def _summary(runs: dict[str, Any], modes: list[str], seeds: int = 1) -> dict[str, Any]:
    return {
        "experiment": "x",
        "target": "bmv2",
        "target_facts": {},
        "topology": {},
        "seeds": seeds,
        "modes": modes,
        "order": {"per_seed": {str(seed): list(modes) for seed in range(seeds)}},
        "figures": {},
        "bottleneck": {},
        "versions": {"project_commit": "c", "p4c": "p", "bmv2": "b", "kernel": "k"},
        "runs": runs,
    }


def test_a_summary_missing_a_seed_or_a_field_is_ill_formed() -> None:
    transfer = {
        "bytes_sent": 1,
        "bytes_delivered": 1,
        "bytes_lost": 0,
        "completed": True,
        "goodput_bps": 1.0,
        "retransmits": {},
    }
    summary = _summary(
        {"mrc": {"0": _run_records({"a->b": transfer})}, "single": {}}, ["mrc", "single"]
    )
    assert summary_problems(summary, seeds=1) == ["runs['single'] does not hold seeds 0..0"]
    summary["runs"]["single"] = {"0": _run_records({"a->b": {"completed": True}})}
    (problem,) = summary_problems(summary, seeds=1)
    assert "single/0/a->b lacks" in problem
    del summary["order"]
    assert summary_problems(summary, seeds=1) == ["missing 'order'"]


def test_a_summary_holds_exactly_the_modes_it_lists() -> None:
    transfer = {field: 0 for field in TRANSFER_FIELDS}
    run = {"0": _run_records({"a->b": transfer})}
    summary = _summary({"ecn_trim_on": run, "ecn_trim_off": run}, ["ecn_trim_on", "ecn_trim_off"])
    assert summary_problems(summary, seeds=1) == []
    summary["runs"] = {"ecn_trim_on": run, "mrc": run}
    assert summary_problems(summary, seeds=1) == [
        "runs of modes not listed in 'modes': ['mrc']",
        "runs['ecn_trim_off'] does not hold seeds 0..0",
    ]
    summary["runs"] = {"ecn_trim_on": run, "ecn_trim_off": {"0": _run_records({})}}
    assert summary_problems(summary, seeds=1) == ["ecn_trim_off/0 has no transfers"]


def test_modes_on_one_network_share_a_bring_up_and_modes_on_two_get_one_each() -> None:
    spray = EXPERIMENTS["spray"]
    (shared,) = bring_ups(spray, parse_params(spray, {})).items()
    assert shared[0] == "" and shared[1][1] == [
        "mrc",
        "single",
        "roce:adaptive:1qp",
        "roce:adaptive:4qp",
        "roce:adaptive:16qp",
    ]
    incast = EXPERIMENTS["incast"]
    groups = bring_ups(incast, parse_params(incast, {}))
    assert {suffix: modes for suffix, (_, modes) in groups.items()} == {
        "-ecn_trim_on": ["ecn_trim_on"],
        "-ecn_trim_off": ["ecn_trim_off"],
    }


def test_a_variant_without_ecn_and_trimming_never_marks_and_never_trims(
    tmp_path: Path,
) -> None:
    on = load_topology(
        str(
            write_variant(
                "leaf-spine-4x4", Variant(fabric_queue_depth=32, trim_threshold=24), tmp_path
            )
        )
    )
    off_file = write_variant(
        "leaf-spine-4x4",
        Variant(fabric_queue_depth=32, trim_threshold=24, ecn_and_trimming=False),
        tmp_path,
        "off.yaml",
    )
    off = load_topology(str(off_file))
    deepest = max(link.params.queue_depth for link in off.all_links)
    assert off.settings.ecn.min_threshold > deepest
    assert on.settings.trimming and not off.settings.trimming
    # the agents mark as in the variant with them (the testbed hands them the same values)
    assert off.settings.dscp == on.settings.dscp
    # the rest of the fabric is as in the variant with them
    assert [link.params for link in off.all_links] == [link.params for link in on.all_links]


def test_a_host_queue_slows_only_that_hosts_last_hop_and_an_unknown_host_is_refused(
    tmp_path: Path,
) -> None:
    variant = Variant(host_queues=(HostQueue("h1", rate_pps=50, depth=60),))
    topology = load_topology(str(write_variant("leaf-spine-4x4", variant, tmp_path)))
    shaped = {
        str(link.id): link.params for link in topology.host_links if link.params.queue_rate_pps
    }
    assert list(shaped) == ["h1:0<->l1:1"]
    assert shaped["h1:0<->l1:1"].queue_depth == 60
    with pytest.raises(ValueError, match="no host 'h99'"):
        write_variant("leaf-spine-4x4", Variant(host_queues=(HostQueue("h99", 1, 60),)), tmp_path)


def test_a_flow_may_cross_every_hop_of_every_shortest_path_between_its_leaves() -> None:
    topology = load_topology("leaf-spine-4x4")
    assert fabric_hops(topology, "h5", "h1") == {
        *(f"l2->s{i}" for i in range(1, 5)),
        *(f"s{i}->l1" for i in range(1, 5)),
    }
    assert fabric_hops(topology, "h1", "h2") == frozenset()  # one leaf: no fabric hop


def test_the_default_victim_shares_the_spine_links_into_the_receivers_leaf() -> None:
    params = parse_params(EXPERIMENTS["incast"], {})
    shared = shared_hops(load_topology("leaf-spine-4x4"), params)
    assert {f"s{i}->l1" for i in range(1, 5)} <= set(shared)


def test_a_victim_that_shares_no_link_with_the_incast_is_refused() -> None:
    # h14 -> h15 stays within l4; h3 and h4 sit beside the receiver on l1
    params = parse_params(
        EXPERIMENTS["incast"],
        {"senders": "h3,h4", "victim_source": "h14", "victim_destination": "h15"},
    )
    with pytest.raises(ValueError, match="shares no switch-to-switch link"):
        shared_hops(load_topology("leaf-spine-4x4"), params)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"senders": "h5,h5"}, "distinct hosts"),
        ({"senders": ""}, "distinct hosts"),
        ({"victim_destination": "h1"}, "must all differ"),
        ({"senders": "h5,h9,h6"}, "must all differ"),
        ({"incast_at_s": "20"}, "incast_at_s < victim_duration_s"),
        ({"trim_threshold": "32"}, "trim_threshold must be below queue_depth"),
    ],
)
def test_incast_settings_that_make_no_incast_with_a_victim_are_refused(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_params(EXPERIMENTS["incast"], settings)


def test_window_goodput_averages_only_the_bins_wholly_inside_the_window() -> None:
    series = _series([1.0, 2.0, 4.0, 8.0, 16.0], bin_s=1.0)  # bins end at 1..5 s
    assert window_goodput(series, 1.0, 4.0, bin_s=1.0) == pytest.approx((2 + 4 + 8) / 3)
    assert window_goodput(series, 1.5, 3.9, bin_s=1.0) == pytest.approx(4.0)
    assert window_goodput(series, 1.2, 1.8, bin_s=1.0) is None


def _port_status(cells: dict[str, dict[str, dict[str, int]]]) -> dict[str, Any]:
    return {"counters": {sw: {"ports": ports, "members": {}} for sw, ports in cells.items()}}


def test_congestion_signals_add_every_switchs_ports_and_are_unknown_when_one_is_unread() -> None:
    before = _port_status({"l1": {"1": {"trims": 5, "ecn_marks": 1}}, "s1": {}})
    after = _port_status(
        {
            "l1": {"1": {"trims": 7, "ecn_marks": 1}, "2": {"trims": 1, "ecn_marks": 4}},
            "s1": {"3": {"trims": 0, "ecn_marks": 10}},
        }
    )
    assert congestion_signals(before, after) == {"trims": 3, "ecn_marks": 14}
    after["counters"]["s1"] = {"error": "timed out"}
    assert congestion_signals(before, after) == {"trims": None, "ecn_marks": None}


def test_shortfall_is_what_a_flow_missed_of_its_level_over_the_window_in_bytes() -> None:
    series = _series([8.0, 0.0, 4.0, 8.0, 8.0], bin_s=1.0)  # bits/s, bins end at 1..5 s
    # bins 2-4 lie in the window: 8 + 4 + 0 bits short at 8 bit/s over 1 s bins = 12 bits
    assert shortfall_bytes(series, 8.0, 1.0, 4.0, bin_s=1.0) == pytest.approx(12 / 8)
    # a long shallow dip costs as much as a short deep one
    shallow = _series([8.0] + [6.0] * 4, bin_s=1.0)
    deep = _series([8.0, 0.0, 8.0, 8.0, 8.0], bin_s=1.0)
    assert shortfall_bytes(shallow, 8.0, 1.0, 5.0, 1.0) == shortfall_bytes(deep, 8.0, 1.0, 5.0, 1.0)
    assert shortfall_bytes(series, 8.0, 1.2, 1.8, bin_s=1.0) is None


def test_an_incast_naming_a_host_the_topology_lacks_is_refused_before_any_bring_up(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = experiments_main(
        ["incast", "--seeds", "1", "--set", "senders=h5,h99", "--out", str(tmp_path)]
    )
    assert status == EXIT_USAGE
    assert "leaf-spine-4x4 has no host 'h99'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no results directory, nothing started


NO_MEMBERS = "members: the kernel keeps no per-next-hop counters (ports only)"


def _tx_status(tx: dict[str, dict[int, int]]) -> dict[str, Any]:
    """A controller status of a target without member counters (linux): port tx only."""
    return {
        "groups": {},
        "counters": {
            sw: {
                "ports": {str(p): {"tx_packets": n, "rx_packets": 0} for p, n in ports.items()},
                "members": {},
                "not_counted": [NO_MEMBERS],
            }
            for sw, ports in tx.items()
        },
    }


def test_without_member_counters_the_busiest_uplink_comes_from_the_ports_tx_counters() -> None:
    topology = load_topology("leaf-spine")  # l1 ports 3..6 go to s1..s4, port 1 to h1
    before = _tx_status({"l1": {1: 0, 3: 10, 4: 10, 5: 10, 6: 10}})
    after = _tx_status({"l1": {1: 5000, 3: 20, 4: 30, 5: 910, 6: 15}})
    # the host port sent most, but only switch-to-switch ports are uplinks
    assert busiest_uplink(topology, "l1", before, after) == ("s3", 5, 900, PORT_TX_COUNTERS)


def test_without_member_counters_a_link_load_adds_the_tx_of_both_its_ends() -> None:
    topology = load_topology("leaf-spine")
    before = _tx_status({"l1": {3: 100}, "s1": {1: 50, 2: 0}, "l2": {3: 0}})
    after = _tx_status({"l1": {3: 130}, "s1": {1: 57, 2: 4}, "l2": {3: 9}})
    loads = link_loads(topology, before, after)
    assert loads.packets["l1:3<->s1:1"] == 30 + 7
    assert loads.packets["l2:3<->s1:2"] == 9 + 4
    assert loads.sources == (PORT_TX_COUNTERS,)


def test_a_difference_is_only_taken_between_snapshots_of_the_same_counters() -> None:
    topology = load_topology("leaf-spine")
    members = _status({"l1": {3: 0, 4: 0}})
    ports = _tx_status({"l1": {3: 70, 4: 5}})
    with pytest.raises(CountersUnavailable, match="read from members before and port_tx after"):
        busiest_uplink(topology, "l1", members, ports)


def test_counters_a_target_says_it_cannot_count_are_unavailable_never_zero() -> None:
    topology = load_topology("leaf-spine")
    before = _status({"l1": {3: 0}, "s1": {1: 0}})
    after = _status({"l1": {}, "s1": {1: 7}})
    after["counters"]["l1"]["not_counted"] = [NO_MEMBERS]  # and no port counters either
    with pytest.raises(
        CountersUnavailable,
        match=r"l1: counters unavailable \(members: the kernel .*; no port tx counters\)",
    ):
        busiest_uplink(topology, "l1", before, after)
    loads = link_loads(topology, before, after)
    assert loads.packets["l1:3<->s1:1"] is None
    assert set(loads.packets.values()) == {None}
    assert loads.sources == ()  # no load was read, so no source is claimed
    ports_before = _port_status({"l1": {"1": {"trims": 0, "ecn_marks": 0}}})
    ports_after = _port_status({"l1": {"1": {"trims": 0, "ecn_marks": 3}}})
    ports_after["counters"]["l1"]["not_counted"] = ["trims: the linux target does not trim"]
    assert congestion_signals(ports_before, ports_after) == {"trims": None, "ecn_marks": 3}


def test_a_run_that_records_problems_makes_the_summary_ill_formed() -> None:
    """A failover run whose link could not be cut measured no failover: it must not pass."""
    transfer = {field: 0 for field in TRANSFER_FIELDS}
    run = {"0": {**_run_records({"a->b": transfer}), "problems": []}}
    summary = _summary({"mrc": run, "single": run}, ["mrc", "single"])
    assert summary_problems(summary, seeds=1) == []
    summary["runs"]["single"] = {
        "0": {**_run_records({"a->b": transfer}), "problems": ["no link was cut: counters"]}
    }
    assert summary_problems(summary, seeds=1) == ["single/0: no link was cut: counters"]


def _both(members: dict[int, int], tx: dict[int, int], path_mode: str) -> dict[str, Any]:
    """A BMv2-like status of l1 with member and port tx counters, in ``path_mode``."""
    status = _status({"l1": members})
    status["counters"]["l1"]["ports"] = {
        str(p): {"tx_packets": n, "rx_packets": 0} for p, n in tx.items()
    }
    status["path_mode"] = path_mode
    return status


@pytest.mark.parametrize("path_mode", ["structured", "srv6"])
def test_in_an_exact_path_mode_the_ports_tell_what_the_members_never_saw(path_mode) -> None:
    """Carriers and structured EVs leave by their own tables, past the next-hop members."""
    topology = load_topology("leaf-spine")
    before = _both({3: 0, 4: 0, 5: 0, 6: 0}, {3: 0, 4: 0, 5: 0, 6: 0}, path_mode)
    after = _both({3: 50, 4: 0, 5: 0, 6: 0}, {3: 60, 4: 10, 5: 900, 6: 10}, path_mode)
    assert busiest_uplink(topology, "l1", before, after) == ("s3", 5, 900, PORT_TX_COUNTERS)
    in_ecmp = busiest_uplink(
        topology, "l1", _both({3: 0}, {3: 0}, "ecmp"), _both({3: 50}, {5: 900}, "ecmp")
    )
    assert in_ecmp.source == MEMBER_COUNTERS and in_ecmp.peer == "s1"


@pytest.mark.parametrize("mode", ["structured", "srv6"])
def test_a_path_mode_kernel_switches_cannot_carry_exits_3_before_any_bring_up(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    mode: str,
) -> None:
    from controller.southbound.linux import path_modes
    from testbed import targets
    from testbed.mininet.switch_target import switch_target

    linux = targets.TargetChoice(switch_target("linux"), "as asked")
    monkeypatch.setattr(targets, "choose_target", lambda name, topology: linux)
    monkeypatch.setattr(path_modes, "seg6local_missing", lambda: "this kernel takes no seg6local")
    status = experiments_main(
        ["spray", "--target", "linux", "--path-mode", mode, "--out", str(tmp_path)]
    )
    assert status == EXIT_UNAVAILABLE
    assert f"path mode {mode} needs a P4 target" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
