"""The linux southbound before (or without) a switch's namespace: nothing is written, and
every call says why rather than failing obscurely."""

from __future__ import annotations

import asyncio

import pytest

from controller.intent import compute_intent
from controller.southbound.interface import SouthboundError
from controller.southbound.linux.southbound import LinuxOptions, LinuxSouthbound
from topologies import Topology


def test_programming_an_unconnected_switch_is_not_ours_and_names_its_namespace(
    leaf_spine: Topology,
) -> None:
    southbound = LinuxSouthbound(["l1"], LinuxOptions(netns_prefix="mnx"))
    result = asyncio.run(southbound.program(compute_intent(leaf_spine).switch("l1")))
    assert not result.ok and not result.ours
    assert result.error == "namespace mnx-l1 not connected"
    assert result.writes == 0


def test_counters_of_an_unconnected_switch_raise(leaf_spine: Topology) -> None:
    southbound = LinuxSouthbound(["l1"])
    with pytest.raises(SouthboundError, match="namespace l1 not connected"):
        asyncio.run(southbound.read_counters("l1", [1], [0]))


def test_sending_frames_is_refused_plainly() -> None:
    southbound = LinuxSouthbound(["l1"])
    with pytest.raises(SouthboundError, match="not supported on the linux target"):
        asyncio.run(southbound.send_frames("l1", [(1, b"\x00" * 60)]))
