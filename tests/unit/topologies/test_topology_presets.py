"""The shipped presets load by name and are exactly what their generator calls produce."""

from __future__ import annotations

import pytest

from topologies import PRESETS, Role, load_topology, resolve_topology
from topologies.presets import PRESET_DIR


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_file_is_its_generator_output(name):
    preset = PRESETS[name]
    assert preset.path.read_text(encoding="utf-8") == preset.render(), (
        f"{preset.path} is stale: run `python -m topologies.generate presets`"
    )


def test_the_issue_presets_are_all_shipped():
    assert set(PRESETS) == {"leaf-spine", "leaf-spine-4x4", "fat-tree", "two-plane"}
    assert sorted(path.stem for path in PRESET_DIR.glob("*.yaml")) == sorted(PRESETS)


@pytest.mark.parametrize(
    ("name", "leaves", "spines", "hosts", "planes"),
    [
        ("leaf-spine", 2, 4, 4, 1),
        ("leaf-spine-4x4", 4, 4, 16, 1),
        ("two-plane", 4, 4, 4, 2),
    ],
)
def test_leaf_spine_presets_have_their_advertised_size(name, leaves, spines, hosts, planes):
    topology = load_topology(name)
    roles = [switch.role for switch in topology.switches]
    assert roles.count(Role.LEAF) == leaves
    assert roles.count(Role.SPINE) == spines
    assert len(topology.hosts) == hosts
    assert len(topology.planes) == planes
    assert all(len(host.nics) == planes for host in topology.hosts)


def test_fat_tree_preset_is_k4():
    topology = load_topology("fat-tree")
    assert (len(topology.switches), len(topology.hosts)) == (20, 16)


def test_a_path_that_is_not_a_preset_name_is_used_as_a_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(PRESETS["leaf-spine"].render(), encoding="utf-8")
    assert resolve_topology(str(path)) == path
    assert resolve_topology("leaf-spine") == PRESETS["leaf-spine"].path
    assert load_topology(path) == load_topology("leaf-spine")
