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


@pytest.mark.parametrize("preset", ["leaf-spine", "leaf-spine-4x4", "fat-tree", "two-plane"])
def test_in_the_presets_an_ev_names_a_path_and_its_reverse(preset: str) -> None:
    """The receiver answers on the EV it was sent on; the destination's switches then climb by
    the same field values, which in the presets' regular wiring is the reverse path exactly."""
    table = path_table(load_topology(preset))
    for paths in table.paths.values():
        for path in paths:
            ev = path.structured_ev(table.layout, 0xC0000000)
            assert table.reverse(path).structured_ev(table.layout, 0xC0000000) == ev


CROSSED = """\
name: crossed
planes: [{id: 0}]
switches:
- {name: l1, role: leaf, device_id: 1}
- {name: l2, role: leaf, device_id: 2}
- {name: s1, role: spine, device_id: 3}
- {name: s2, role: spine, device_id: 4}
hosts:
- {name: h1, nics: [{switch: l1, port: 1}]}
- {name: h2, nics: [{switch: l2, port: 1}]}
links:
- {a: 'l1:3', b: 's1:1'}
- {a: 'l1:4', b: 's2:1'}
- {a: 'l2:3', b: 's2:2'}
- {a: 'l2:4', b: 's1:2'}
"""


def test_with_uplinks_crossed_the_answers_on_an_ev_take_another_spine(tmp_path) -> None:
    """The reverse path is exact only when the uplinks are in the same order at both ends:
    here l2's first uplink goes to s2, so the EV of l1 -> s1 -> l2 brings answers via s2."""
    path_file = tmp_path / "crossed.yaml"
    path_file.write_text(CROSSED)
    table = path_table(load_topology(str(path_file)))
    forward = table.between("l1", "l2")[0]
    assert forward.switches == ("l1", "s1", "l2")
    ev = forward.structured_ev(table.layout, 0xC0000000)
    field = table.layout.field(0)
    assert field is not None
    uplink = field.value_of(ev)  # what l2 reads in the answers
    (answers,) = [p for p in table.between("l2", "l1") if p.choices == ((0, uplink),)]
    assert answers.switches == ("l2", "s2", "l1")
