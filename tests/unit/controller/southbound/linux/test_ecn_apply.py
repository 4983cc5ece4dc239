"""The tc commands a plan's markers become, in order: the port's tbf under handle 1: first, then
the marker as its child (parent 1:1); a marker no longer wanted gives way to the tbf's bfifo."""

from __future__ import annotations

import asyncio
from typing import cast

from pyroute2 import AsyncIPRoute

from controller.southbound.linux.diff import KernelPlan
from controller.southbound.linux.ecn import EcnMarker, plain_fifo
from controller.southbound.linux.namespace import SwitchNamespace
from hostenv.tbf import tbf_parameters

SHAPER = tbf_parameters(1000, 64)
CODEL = EcnMarker("codel", ("limit", "64", "ce_threshold", "10000us", "ecn"))


class RecordingNamespace(SwitchNamespace):
    """A namespace whose tc commands are recorded instead of run (no netlink is used)."""

    def __init__(self) -> None:
        super().__init__("rec", cast(AsyncIPRoute, None), 0)
        self.commands: list[tuple[str, ...]] = []

    async def _tc(self, *arguments: str) -> None:
        self.commands.append(arguments)


def test_a_marker_is_written_under_its_tbf_of_handle_1() -> None:
    namespace = RecordingNamespace()
    plan = KernelPlan(set_markers=((3, SHAPER, CODEL),), inserts=1)
    requests, failures = asyncio.run(namespace.apply(plan, {}))
    assert (requests, failures) == (1, [])
    assert namespace.commands == [
        ("qdisc", "replace", "dev", "swp3", "root", "handle", "1:", *SHAPER.tc_arguments()),
        ("qdisc", "replace", "dev", "swp3", "parent", "1:1", *CODEL.tc_arguments()),
    ]


def test_an_unwanted_marker_gives_way_to_the_tbfs_fifo() -> None:
    namespace = RecordingNamespace()
    plan = KernelPlan(unset_markers=((3, SHAPER),), deletes=1)
    asyncio.run(namespace.apply(plan, {}))
    assert namespace.commands[-1] == (
        "qdisc", "replace", "dev", "swp3", "parent", "1:1", *plain_fifo(SHAPER).tc_arguments(),
    )  # fmt: skip


def test_a_shaper_alone_is_written_under_handle_1() -> None:
    namespace = RecordingNamespace()
    asyncio.run(namespace.apply(KernelPlan(set_shapers=((2, SHAPER),), inserts=1), {}))
    assert namespace.commands == [
        ("qdisc", "replace", "dev", "swp2", "root", "handle", "1:", *SHAPER.tc_arguments())
    ]
