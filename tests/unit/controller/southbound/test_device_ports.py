"""Renumbering ports at the southbound's edge: every port an intent names becomes the
device's number, packet-ins come back on topology ports, and a switch without a map is left
as it is."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

import pytest

from controller.intent import compute_intent
from controller.intent.model import SwitchIntent
from controller.southbound.device_ports import DevicePorts
from topologies import Topology
from topologies.paths import PathMode


def port_values(value: Any, name: str = "") -> Iterator[tuple[str, int]]:
    """Every int held under a field whose name says it is a port, anywhere in ``value``."""
    if is_dataclass(value) and not isinstance(value, type):
        for item in fields(value):
            yield from port_values(getattr(value, item.name), item.name)
    elif isinstance(value, tuple):
        for item in value:
            yield from port_values(item, name)
    elif isinstance(value, int) and not isinstance(value, bool) and "port" in name:
        yield name, value


def l1_map(topology: Topology) -> DevicePorts:
    return DevicePorts(tuple((port, 400 + port) for port in topology.switch_ports("l1")), 320)


def test_every_port_field_of_the_intent_is_renumbered(leaf_spine: Topology) -> None:
    intent = compute_intent(leaf_spine).switch("l1")
    ports = l1_map(leaf_spine)
    before = list(port_values(intent))
    after = list(port_values(ports.intent(intent)))
    assert len(before) == len(after) > len(intent.ports)
    for (name, old), (same_name, new) in zip(before, after, strict=True):
        assert name == same_name
        assert new == (320 if name == "cpu_port" else 400 + old)


def test_every_port_field_of_structured_ev_and_srv6_is_renumbered(leaf_spine: Topology) -> None:
    for mode in (PathMode.STRUCTURED, PathMode.SRV6):
        intent = compute_intent(leaf_spine, path_mode=mode).switch("l1")
        renumbered = l1_map(leaf_spine).intent(intent)
        held = {value for name, value in port_values(renumbered) if name != "cpu_port"}
        assert held and all(value > 400 for value in held), mode


def test_a_switch_without_a_map_keeps_its_intent(leaf_spine: Topology) -> None:
    intent: SwitchIntent = compute_intent(leaf_spine).switch("s1")
    assert DevicePorts().intent(intent) is intent
    assert DevicePorts().from_device(7) == 7


def test_packet_ins_map_back_and_foreign_device_ports_are_dropped(leaf_spine: Topology) -> None:
    ports = l1_map(leaf_spine)
    assert ports.from_device(403) == 3
    assert ports.from_device(3) is None  # topology port 3 is device port 403, not 3
    assert ports.to_device(3) == 403


def test_two_ports_on_one_device_port_are_refused() -> None:
    with pytest.raises(ValueError, match="share a device port"):
        DevicePorts(((1, 130), (2, 130)))
