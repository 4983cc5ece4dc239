"""Structured EV mode on the sender: each EV of a connection names one exact path to the peer,
the paths shared out evenly, per plane; the EV keeps the entropy port range."""

from __future__ import annotations

from collections import Counter
from ipaddress import ip_address

import pytest

from agent.cli.agent_main import main
from agent.io.structured_evs import StructuredEvs
from topologies import Topology, load_topology
from topologies.paths import path_table


def _address(topology: Topology, host: str, plane: int = 0, v6: bool = False) -> bytes:
    (nic,) = [nic for nic in topology.host(host).nics if nic.plane == plane]
    return (nic.ipv6 if v6 else nic.ipv4).ip.packed


def _path_of(topology: Topology, source: str, destination: str, ev: int) -> tuple[str, ...]:
    """The switches the fabric's structured tables take ``ev`` through (the path whose
    fields ``ev`` holds)."""
    table = path_table(topology)
    (path,) = [
        path
        for path in table.between(source, destination)
        if path.structured_ev(table.layout, ev) == ev
    ]
    return path.switches


def test_leaf_spine_evs_spread_evenly_over_the_four_spines() -> None:
    topology = load_topology("leaf-spine")
    chooser = StructuredEvs(topology, [_address(topology, "h1")], seed=1)
    evs = chooser.evs_for([_address(topology, "h3")], 256)
    assert evs is not None and len(evs) == 256
    assert len(set(evs)) == 256
    assert {plane for plane, _ in evs} == {0}
    spines = Counter(_path_of(topology, "l1", "l2", ev)[1] for _, ev in evs)
    assert spines == {"s1": 64, "s2": 64, "s3": 64, "s4": 64}
    for _, ev in evs:
        assert 0xC000 <= ev >> 16 <= 0xFFFF
        assert ev & 0xFFFF == 0, "over IPv4 the EV is the source port alone"


def test_consecutive_slots_name_different_paths() -> None:
    """Round robin over the slots then rotates over the paths packet by packet."""
    topology = load_topology("leaf-spine")
    chooser = StructuredEvs(topology, [_address(topology, "h1")], seed=2)
    evs = chooser.evs_for([_address(topology, "h4")], 8)
    assert evs is not None
    spines = [_path_of(topology, "l1", "l2", ev)[1] for _, ev in evs]
    assert sorted(spines[:4]) == ["s1", "s2", "s3", "s4"] and spines[4:] == spines[:4]


def test_a_connection_of_one_ev_takes_any_path_not_always_the_first() -> None:
    """The single-path baseline in an exact mode: each connection's one EV lands where a hash
    would, so flows spread over the spines instead of all sharing the first."""
    topology = load_topology("leaf-spine")
    chooser = StructuredEvs(topology, [_address(topology, "h1")], seed=11)
    spines = Counter()
    for _ in range(200):
        evs = chooser.evs_for([_address(topology, "h3")], 1)
        assert evs is not None
        spines[_path_of(topology, "l1", "l2", evs[0][1])[1]] += 1
    assert set(spines) == {"s1", "s2", "s3", "s4"} and min(spines.values()) > 20


def test_fat_tree_across_pods_names_all_four_cores() -> None:
    topology = load_topology("fat-tree")
    (source,) = topology.host("h1").nics
    (destination,) = [nic for _, nic in topology.nics() if nic.switch != source.switch][-1:]
    chooser = StructuredEvs(topology, [source.ipv4.ip.packed], seed=3)
    evs = chooser.evs_for([destination.ipv4.ip.packed], 64)
    assert evs is not None
    paths = Counter(_path_of(topology, source.switch, destination.switch, ev) for _, ev in evs)
    assert len(paths) == len(path_table(topology).between(source.switch, destination.switch))
    assert set(paths.values()) == {64 // len(paths)}


def test_two_planes_alternate_and_each_plane_names_its_own_paths() -> None:
    topology = load_topology("two-plane")
    local = [_address(topology, "h1", plane) for plane in (0, 1)]
    remote = [_address(topology, "h3", plane) for plane in (0, 1)]
    chooser = StructuredEvs(topology, local, seed=4)
    evs = chooser.evs_for(remote, 8)
    assert evs is not None
    assert [plane for plane, _ in evs] == [0, 1] * 4
    table = path_table(topology)
    for plane, ev in evs:
        source = next(nic.switch for nic in topology.host("h1").nics if nic.plane == plane)
        target = next(nic.switch for nic in topology.host("h3").nics if nic.plane == plane)
        assert any(
            path.structured_ev(table.layout, ev) == ev for path in table.between(source, target)
        )


def test_over_ipv6_the_flow_label_bits_are_random_and_the_fields_still_set() -> None:
    topology = load_topology("leaf-spine")
    chooser = StructuredEvs(topology, [_address(topology, "h1", v6=True)], seed=5)
    evs = chooser.evs_for([_address(topology, "h3", v6=True)], 64)
    assert evs is not None
    assert len({ev & 0xFFFF for _, ev in evs}) > 1
    spines = Counter(_path_of(topology, "l1", "l2", ev)[1] for _, ev in evs)
    assert set(spines.values()) == {16}


def test_a_peer_outside_the_topology_gets_random_evs() -> None:
    topology = load_topology("leaf-spine")
    chooser = StructuredEvs(topology, [_address(topology, "h1")], seed=6)
    assert chooser.evs_for([ip_address("192.0.2.1").packed], 16) is None


def test_a_peer_address_on_another_plane_gets_random_evs() -> None:
    topology = load_topology("two-plane")
    local = [_address(topology, "h1", plane) for plane in (0, 1)]
    swapped = [_address(topology, "h3", plane) for plane in (1, 0)]
    assert StructuredEvs(topology, local, seed=9).evs_for(swapped, 8) is None


def test_more_evs_than_the_paths_have_distinct_values_is_refused() -> None:
    topology = load_topology("leaf-spine")
    chooser = StructuredEvs(topology, [_address(topology, "h1")], seed=7)
    # 12 free source-port bits per path over IPv4: 4096 EVs per spine.
    assert chooser.evs_for([_address(topology, "h3")], 4 * 4096) is not None
    with pytest.raises(ValueError, match="distinct structured EVs"):
        chooser.evs_for([_address(topology, "h3")], 4 * 4096 + 4)


def test_this_hosts_address_must_be_in_the_topology() -> None:
    with pytest.raises(ValueError, match=r"192\.0\.2\.1: not a host address of topology"):
        StructuredEvs(load_topology("leaf-spine"), [ip_address("192.0.2.1").packed], seed=8)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--path-mode", "structured"], "needs --topology"),
        (["--topology", "leaf-spine"], "for --path-mode structured or srv6 only"),
        (["--path-mode", "srv6", "--topology", "leaf-spine"], "srv6 runs over IPv6"),
        (["--path-mode", "structured", "--topology", "no-such-preset"], "--path-mode structured:"),
    ],
)
def test_serve_refuses_a_structured_mode_it_cannot_set_up(capsys, extra, message) -> None:
    assert main(["serve", "--plane", "10.0.1.1", "--no-socket", *extra]) == 2
    assert message in capsys.readouterr().err
