"""The port map of hardware switches: each used switch port's device port and the CPU port,
checked like the rest of the file (each mistake at its line), and kept by ``--explicit``."""

from __future__ import annotations

import pytest

from topologies import TopologyError, load_topology_text
from topologies.document import dump_document, explicit_document

FABRIC = """\
switches:
  - name: l1
    role: leaf
    device_id: 1
    cpu_device_port: 192
    device_ports:
      - {port: 1, device_port: 132}
      - {port: 2, device_port: 140}
  - {name: s1, role: spine, device_id: 2}
hosts:
  - name: h1
    nics: [{switch: l1, port: 1}]
links:
  - {a: "l1:2", b: "s1:1"}
"""


def _problems(text: str) -> list[tuple[int, str]]:
    with pytest.raises(TopologyError) as caught:
        load_topology_text(text, source="map.yaml")
    return [(problem.line, problem.message) for problem in caught.value.problems]


def test_mapped_ports_translate_and_unmapped_switches_keep_their_numbers() -> None:
    topology = load_topology_text(FABRIC, source="map.yaml")
    leaf, spine = topology.switch("l1"), topology.switch("s1")
    assert leaf.device_ports == ((1, 132), (2, 140))
    assert (leaf.device_port(1), leaf.device_port(2), leaf.cpu_device_port) == (132, 140, 192)
    assert (spine.device_ports, spine.device_port(1), spine.cpu_device_port) == ((), 1, None)


def test_the_explicit_document_keeps_the_map_and_loads_back_the_same() -> None:
    topology = load_topology_text(FABRIC, source="map.yaml")
    document = explicit_document(topology)
    leaf = document["switches"][0]
    assert leaf["device_ports"] == [
        {"port": 1, "device_port": 132},
        {"port": 2, "device_port": 140},
    ]
    assert leaf["cpu_device_port"] == 192
    assert "device_ports" not in document["switches"][1]
    reloaded = load_topology_text(dump_document(document), source="explicit.yaml")
    assert reloaded.switches == topology.switches


def test_a_port_mapped_twice_is_named_at_the_second_entry() -> None:
    text = FABRIC.replace("{port: 2, device_port: 140}", "{port: 1, device_port: 140}")
    assert (8, "switch 'l1' device_ports #2: port 1 is mapped twice (first at line 7)") in (
        _problems(text)
    )


def test_a_device_port_given_to_two_ports_is_named() -> None:
    text = FABRIC.replace("device_port: 140", "device_port: 132")
    assert any(
        line == 8 and "device port 132 is given to two ports (first at line 7)" in message
        for line, message in _problems(text)
    )


def test_a_used_port_without_a_device_port_is_named_with_its_link() -> None:
    text = FABRIC + '  - {a: "l1:3", b: "s1:2"}\n'
    assert (6, "switch 'l1': device_ports has no entry for port 3 (link l1:3-s1:2)") in (
        _problems(text)
    )


def test_a_mapped_port_nothing_uses_is_named_at_its_entry() -> None:
    text = FABRIC.replace(
        "      - {port: 2, device_port: 140}\n",
        "      - {port: 2, device_port: 140}\n      - {port: 7, device_port: 148}\n",
    )
    assert (9, "switch 'l1': device_ports maps port 7, which no link or NIC uses") in (
        _problems(text)
    )


def test_the_cpu_port_may_not_be_a_switch_ports_device_port() -> None:
    text = FABRIC.replace("cpu_device_port: 192", "cpu_device_port: 140")
    assert (5, "switch 'l1': cpu_device_port 140 is also the device port of a switch port") in (
        _problems(text)
    )


@pytest.mark.parametrize(
    ("old", "new", "line", "cause"),
    [
        ("device_port: 140", "device_port: 512", 8, "'device_port' is 512, outside 0..511"),
        ("cpu_device_port: 192", "cpu_device_port: -1", 5, "outside 0..511"),
        ("{port: 2, device_port: 140}", "{port: 2, dev: 140}", 8, "unknown field 'dev'"),
        ("{port: 2, device_port: 140}", "{port: 2}", 8, "missing required field 'device_port'"),
    ],
)
def test_values_out_of_range_or_misspelt_are_named_at_their_line(
    old: str, new: str, line: int, cause: str
) -> None:
    problems = _problems(FABRIC.replace(old, new))
    assert any(at == line and cause in message for at, message in problems), problems
