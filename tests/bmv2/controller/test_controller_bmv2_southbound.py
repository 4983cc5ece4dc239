"""The P4Runtime southbound against real BMv2 switches: an intent installs, reads back equal to
itself (PI's watch_port quirk tolerated), and a second reconciliation writes nothing."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from controller.app.config import ControllerConfig
from controller.app.runtime import build_southbound
from controller.intent import compute_intent
from controller.intent.model import SwitchIntent
from controller.southbound.interface import ProgramResult, SwitchRole
from controller.southbound.mapping import desired_records
from controller.southbound.p4_program import PINNED_MEMBER_ID_BASE
from controller.southbound.plan import plan_writes
from controller.southbound.queues import PRIORITY_QUEUES
from controller.southbound.records import GroupRecord, RecordSet

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.mininet]


class Roles:
    """SouthboundEvents that remember each switch's role."""

    def __init__(self) -> None:
        self.roles: dict[str, SwitchRole | None] = {}

    def switch_connected(self, switch: str, role: SwitchRole) -> None:
        self.roles[switch] = role

    def switch_disconnected(self, switch: str) -> None:
        self.roles[switch] = None

    def frame_received(self, switch: str, port: int, frame: bytes) -> None:
        pass


def _empty(intent: SwitchIntent) -> SwitchIntent:
    return dataclasses.replace(
        intent, dscp_rules=(), ports=(), members=(), groups=(), routes_v4=(), routes_v6=()
    )


def test_an_intent_installs_reads_back_equal_and_a_second_reconcile_writes_nothing(
    pair_network, pair_topology
):
    intent = compute_intent(pair_topology)
    names = [switch.name for switch in pair_topology.switches]

    async def scenario() -> tuple[dict, dict, dict, dict]:
        southbound = build_southbound(pair_topology, ControllerConfig())
        roles = Roles()
        task = asyncio.create_task(southbound.run(roles))
        try:
            for _ in range(600):
                if all(roles.roles.get(name) is SwitchRole.PRIMARY for name in names):
                    break
                await asyncio.sleep(0.05)
            else:
                raise TimeoutError(f"not primary on every switch: {roles.roles}")
            wiped: dict[str, ProgramResult] = {}
            first: dict[str, ProgramResult] = {}
            held: dict[str, RecordSet] = {}
            second: dict[str, ProgramResult] = {}
            for name in names:
                wiped[name] = await southbound.program(_empty(intent.switch(name)), read_back=True)
                first[name] = await southbound.program(intent.switch(name))
                held[name] = await southbound.read_held(name)
                second[name] = await southbound.program(intent.switch(name), read_back=True)
            return wiped, first, held, second
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    wiped, first, held, second = asyncio.run(scenario())
    for name in names:
        desired = desired_records(intent.switch(name))
        assert wiped[name].ok, wiped[name]
        assert first[name].ok, first[name]
        # Everything but the default entries (modifies) is inserted; queues set over Thrift.
        defaults = [r for r in desired.records() if getattr(r, "is_default", False)]
        assert defaults, "the intent holds default entries (trim_dscp, ev_field)"
        assert first[name].inserts == len(desired) - len(defaults)
        # A depth and a rate for each priority queue of every port.
        per_port = 2 * PRIORITY_QUEUES
        assert first[name].queue_commands == per_port * len(intent.switch(name).ports)
        assert set(held[name]) == set(desired)
        assert plan_writes(held[name], desired).is_empty
        assert second[name].ok and second[name].read_back
        assert second[name].writes == 0, f"{name} rewrote state on reconcile: {second[name]}"
    spread = next(
        record
        for record in held["l1"].values()
        if isinstance(record, GroupRecord) and len(record.members) == 2
    )
    # Port 4's watched member, and port 3's unwatched twin: the group's anchor.
    assert [member.member_id for member in spread.members] == [4, PINNED_MEMBER_ID_BASE + 3]
