"""The path table: every exact path between edge switches, its EV fields, uSIDs and reverse."""

from __future__ import annotations

from ipaddress import IPv6Address

import pytest

from topologies import load_topology
from topologies.paths import EvField, PathError, path_table, usid_block


def test_leaf_spine_has_one_path_per_spine_each_way() -> None:
    table = path_table(load_topology("leaf-spine"))
    paths = table.between("l1", "l2")
    assert [path.switches for path in paths] == [("l1", f"s{i}", "l2") for i in range(1, 5)]
    assert [path.choices for path in paths] == [((0, i),) for i in range(4)]
    assert paths[1].carrier == IPv6Address("fcbb:bb00:1:4:2::")
    assert [hex(path.structured_ev(table.layout, 0xC0000000)) for path in paths] == [
        "0xc0000000",
        "0xc0010000",
        "0xc0020000",
        "0xc0030000",
    ]


def test_every_path_has_its_reverse_through_the_same_switches() -> None:
    table = path_table(load_topology("fat-tree"))
    for paths in table.paths.values():
        for path in paths:
            back = table.reverse(path)
            assert back.switches == path.switches[::-1]
            assert back.plane == path.plane


def test_fat_tree_paths_across_pods_choose_at_two_tiers() -> None:
    table = path_table(load_topology("fat-tree"))
    assert table.layout.fields == (EvField(0, 16, 1), EvField(1, 17, 1))
    across = table.between("e1", "e3")
    assert len(across) == 4
    assert len({path.switches for path in across}) == 4
    assert all(len(path.usids) == 5 for path in across)


def test_planes_are_separate() -> None:
    table = path_table(load_topology("two-plane"))
    assert ("p0l1", "p1l2") not in table.paths
    (path, _) = table.between("p1l1", "p1l2")
    assert path.block == usid_block(1)


def test_a_field_refuses_a_value_it_cannot_hold() -> None:
    with pytest.raises(ValueError, match=r"0\.\.3"):
        EvField(0, 16, 2).place(0, 4)


def test_a_plane_beyond_the_block_scheme_is_refused() -> None:
    with pytest.raises(PathError, match="plane 256"):
        usid_block(256)
