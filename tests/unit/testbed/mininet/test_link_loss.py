"""Random fabric loss as nftables rules in the patch panel: what the rules say, which frames
they may drop (UDP 4791 entering from one switch's end) and which never (LLDP, anything
else), how their counters are read back; and the NIC counters the ``nic`` placement reads."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from testbed.mininet.link_loss import (
    LLDP_COMMENT,
    LOSS_TABLE,
    LossCounters,
    loss_directions,
    parse_loss_counters,
    render_loss_removal,
    render_loss_ruleset,
)
from testbed.mininet.testbed_host import parse_tx_packets
from testbed.mininet.wiring import plan_wiring
from topologies import load_topology


def _rules(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if "comment" in line]


def test_a_rate_that_is_no_probability_is_refused_even_without_links() -> None:
    with pytest.raises(ValueError, match="probability between 0 and 1"):
        render_loss_ruleset(1.5, {})


def test_each_direction_drops_only_udp_4791_entering_from_its_own_end_and_counts_both() -> None:
    script = render_loss_ruleset(0.01, {"l1-3": "l1:3->s1", "s1-1": "s1:1->l1"})
    lldp, *directions = _rules(script)
    assert lldp == f'ether type 0x88cc counter accept comment "{LLDP_COMMENT}"'
    assert directions == [
        'iifname "l1-3" udp dport 4791 counter numgen random mod 1000000 < 10000 counter drop '
        'comment "l1:3->s1"',
        'iifname "s1-1" udp dport 4791 counter numgen random mod 1000000 < 10000 counter drop '
        'comment "s1:1->l1"',
    ]
    # LLDP is accepted before any drop rule can see it
    assert script.index("0x88cc") < script.index("drop")
    # replaces whatever table there was, in one transaction
    assert script.startswith(f"add table bridge {LOSS_TABLE}\ndelete table bridge {LOSS_TABLE}\n")
    assert "hook forward" in script and "policy accept" in script


def test_rate_zero_counts_and_drops_nothing() -> None:
    (_, rule) = _rules(render_loss_ruleset(0.0, {"l1-3": "l1:3->s1"}))
    assert "< 0 counter drop" in rule  # no random number is below 0


def test_a_name_that_could_break_out_of_the_rule_is_refused() -> None:
    for bad in ('l1"-3', "l1-3;", "", "a\nb"):
        with pytest.raises(ValueError, match="cannot be written"):
            render_loss_ruleset(0.1, {bad: "l1:3->s1"})


def test_every_fabric_link_is_lossy_both_ways_and_named_as_the_bottleneck_records_name_it() -> None:
    topology = load_topology("leaf-spine")
    wiring = plan_wiring(topology, "mn0a1b")
    directions = loss_directions(wiring.patches)
    assert len(directions) == 2 * len(topology.links)
    expected = {
        f"{end.node}:{end.port}->{far.node}"
        for link in topology.links
        for end, far in ((link.a, link.b), (link.b, link.a))
    }
    assert set(directions.values()) == expected
    assert directions["l1-3"] == "l1:3->s1" and directions["s1-1"] == "s1:1->l1"


def test_counters_are_read_per_direction_and_lldp_apart() -> None:
    listing = """{"nftables": [
      {"metainfo": {"version": "1.0.6"}},
      {"table": {"family": "bridge", "name": "mrc_fabric_loss"}},
      {"rule": {"comment": "lldp", "expr": [
          {"match": {}}, {"counter": {"packets": 42, "bytes": 0}}, {"accept": null}]}},
      {"rule": {"comment": "l1:3->s1", "expr": [
          {"match": {}}, {"match": {}}, {"counter": {"packets": 1000, "bytes": 0}},
          {"match": {}}, {"counter": {"packets": 11, "bytes": 0}}, {"drop": null}]}},
      {"rule": {"comment": "s1:1->l1", "expr": [
          {"counter": {"packets": 300, "bytes": 0}}, {"counter": {"packets": 2, "bytes": 0}}]}}
    ]}"""
    directions, lldp = parse_loss_counters(listing)
    assert lldp == 42
    assert directions == {
        "l1:3->s1": LossCounters(matched=1000, dropped=11),
        "s1:1->l1": LossCounters(matched=300, dropped=2),
    }
    assert parse_loss_counters("") == ({}, 0)


def test_a_nics_sent_packets_come_from_the_kernels_counters() -> None:
    listing = (
        '[{"ifname": "lo", "stats64": {"tx": {"packets": 5}}},'
        ' {"ifname": "eth0", "stats64": {"tx": {"packets": 1200}}},'
        ' {"ifname": "eth1", "stats64": {"tx": {"packets": 7}}}]'
    )
    assert parse_tx_packets(listing, ["eth0", "eth1"]) == {"eth0": 1200, "eth1": 7}


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft (nftables) is not installed")
def test_the_kernels_nftables_accepts_the_rendered_rules() -> None:
    """``nft -c`` parses and checks the scripts against the kernel without applying them."""
    for script in (
        render_loss_ruleset(0.05, {"l1-3": "l1:3->s1", "s1-1": "s1:1->l1"}),
        render_loss_removal(),
    ):
        proc = subprocess.run(
            ["nft", "-c", "-f", "-"], input=script, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
            pytest.skip("nft -c needs CAP_NET_ADMIN (run as root)")
        assert proc.returncode == 0, proc.stderr
