"""Finding the topology link an operator means by two node names (``cut l1 s1``)."""

from __future__ import annotations

import pytest

from topologies import LinkId, load_topology, load_topology_text
from topologies.link_lookup import LinkNotFound, find_link

_PARALLEL = """\
name: parallel
switches:
  - {name: l1, role: leaf, device_id: 1}
  - {name: s1, role: spine, device_id: 2}
hosts:
  - name: h1
    nics:
      - {switch: l1, port: 1}
links:
  - {a: "l1:2", b: "s1:1"}
  - {a: "l1:3", b: "s1:2"}
"""


def test_a_link_is_found_by_node_names_in_either_order():
    topology = load_topology("leaf-spine")
    link = find_link(topology, "s1", "l1")
    assert link.id == find_link(topology, "l1", "s1").id
    assert {link.a.node, link.b.node} == {"l1", "s1"}
    assert find_link(topology, "h1", "l1").id in {nic_link.id for nic_link in topology.host_links}


def test_parallel_links_need_a_port_and_the_error_lists_them():
    topology = load_topology_text(_PARALLEL)
    with pytest.raises(LinkNotFound, match=r"2 links between l1 and s1.*l1:2.*l1:3"):
        find_link(topology, "l1", "s1")
    link = find_link(topology, "l1:3", "s1")
    assert link.id == LinkId.between(link.a, link.b)
    assert {(end.node, end.port) for end in (link.a, link.b)} == {("l1", 3), ("s1", 2)}


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ("l1", "l2", "no link between l1 and l2"),
        ("l1", "x9", "'x9' is neither a switch nor a host"),
        ("l1:x", "s1", "must be a number"),
        ("l1:7", "s1", "no link between l1:7 and s1"),
    ],
)
def test_a_link_that_does_not_exist_is_a_clear_error(a, b, message):
    with pytest.raises(LinkNotFound, match=message):
        find_link(load_topology("leaf-spine"), a, b)


# -- the linux target: kernel switches in namespaces of their own ------------------------------
