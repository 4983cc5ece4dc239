"""The experiments' pure parts, without a network: transfer figures, recovery time, the
permutation, link loads from member counters, parameters, topology variants, summary checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.counters import CountersUnavailable, busiest_uplink, link_loads
from experiments.experiment import parse_params
from experiments.metrics import recovery_time, transfer_metrics
from experiments.registry import EXPERIMENTS
from experiments.results import summary_problems
from experiments.spray import permutation
from experiments.topology_variant import Variant, write_variant
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
    metrics = transfer_metrics(_perf_result(posted=10, acked=10, received=10))
    assert metrics["bytes_sent"] == metrics["bytes_delivered"] == 10_000
    assert metrics["bytes_lost"] == 0 and metrics["completed"]
    assert metrics["retransmits"] == {"nack": 1, "sack_gap": 2, "timeout": 3}


def test_a_message_never_delivered_counts_as_lost_and_not_completed() -> None:
    metrics = transfer_metrics(_perf_result(posted=10, acked=9, received=9))
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
    assert busiest_uplink(topology, "l1", before, after) == ("s2", 4, 800)


def test_link_load_adds_both_ends_and_is_unknown_where_counters_were_not_read() -> None:
    topology = load_topology("leaf-spine")
    zero = {"l1": {3: 0}, "s1": {1: 0}, "l2": {3: 0}, "s2": {}}
    before = _status(zero)
    after = _status({"l1": {3: 5}, "s1": {1: 7}, "l2": {3: 1}, "s2": {}})
    after["counters"]["s2"] = {"error": "timed out"}
    loads = link_loads(topology, before, after)
    assert loads["l1:3<->s1:1"] == 12
    assert loads["l2:3<->s1:2"] == 1
    assert loads["l1:4<->s2:1"] is None
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


def test_a_summary_missing_a_seed_or_a_field_is_ill_formed() -> None:
    transfer = {
        "bytes_sent": 1,
        "bytes_delivered": 1,
        "bytes_lost": 0,
        "completed": True,
        "goodput_bps": 1.0,
        "retransmits": {},
    }
    summary: dict[str, Any] = {
        "experiment": "x",
        "target": "bmv2",
        "topology": {},
        "seeds": 1,
        "figures": {},
        "versions": {"project_commit": "c", "p4c": "p", "bmv2": "b", "kernel": "k"},
        "runs": {"mrc": {"0": {"transfers": {"a->b": transfer}}}, "single": {}},
    }
    assert summary_problems(summary, seeds=1) == ["runs['single'] does not hold seeds 0..0"]
    summary["runs"]["single"] = {"0": {"transfers": {"a->b": {"completed": True}}}}
    (problem,) = summary_problems(summary, seeds=1)
    assert "single/0/a->b lacks" in problem
