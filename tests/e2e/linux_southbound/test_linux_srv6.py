"""The linux southbound in the SRv6 path mode against real namespaces: program() writes each
switch's seg6local routes on its dummy interface and a plain route per neighbour's uSID; a
second program() reads them back and writes nothing; going back to ECMP removes them all.

Root and a kernel that takes seg6local NEXT-C-SID routes (Linux 6.1, CONFIG_IPV6_SEG6_LWTUNNEL,
CONFIG_DUMMY); skips with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from controller.intent import compute_intent
from controller.southbound.interface import ProgramResult
from controller.southbound.linux.names import ROUTE_PROTOCOL
from controller.southbound.linux.seg6 import ROUTE_DEVICE, usid_locator
from controller.southbound.linux.southbound import LinuxSouthbound
from hostenv.seg6 import seg6local_missing
from tests.e2e.linux_southbound.kernel_lab import KernelFabricLab
from tests.e2e.linux_southbound.southbound_driver import running_southbound
from topologies.model import Topology
from topologies.paths import PathMode

pytestmark = [pytest.mark.root, pytest.mark.timeout(180)]

SWITCHES = ("l1", "l2", "s1", "s2")


@pytest.fixture(autouse=True)
def kernel_srv6() -> None:
    missing = seg6local_missing()
    if missing is not None:
        pytest.skip(f"SRv6 on kernel switches: {missing}")


async def _program(
    southbound: LinuxSouthbound, topology: Topology, mode: PathMode, *, read_back: bool = False
) -> dict[str, ProgramResult]:
    intent = compute_intent(topology, path_mode=mode)
    results = await asyncio.gather(
        *(southbound.program(intent.switch(name), read_back=read_back) for name in SWITCHES)
    )
    return {result.switch: result for result in results}


def _usid_routes(lab: KernelFabricLab, switch: str) -> dict[str, dict]:
    shown = json.loads(
        lab.run_in(switch, ["ip", "-j", "-6", "route", "show", "proto", str(ROUTE_PROTOCOL)])
    )
    return {route["dst"]: route for route in shown if route["dst"].startswith("fcbb:")}


def test_srv6_routes_are_written_read_back_unchanged_and_removed_with_the_mode(
    fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    async def scenario() -> tuple[dict, dict, dict[str, dict], dict]:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            first = await _program(southbound, small_topology, PathMode.SRV6)
            again = await _program(southbound, small_topology, PathMode.SRV6, read_back=True)
            written = {name: _usid_routes(fabric_lab, name) for name in SWITCHES}
            back = await _program(southbound, small_topology, PathMode.ECMP, read_back=True)
            return first, again, written, back

    first, again, written, back = asyncio.run(scenario())
    assert all(result.ok for result in first.values()), first
    intent = compute_intent(small_topology, path_mode=PathMode.SRV6).switch("l1")
    (own,) = intent.local_usids
    locator = usid_locator(own.block, own.usid)
    l1 = written["l1"]
    assert l1[str(locator)]["encap"] == "seg6local" and l1[str(locator)]["dev"] == ROUTE_DEVICE
    last_hop = str(locator.network_address)
    assert l1[last_hop]["encap"] == "seg6local" and l1[last_hop]["dev"] == ROUTE_DEVICE
    for hop in intent.usid_next_hops:
        plain = l1[str(usid_locator(hop.block, hop.usid))]
        assert plain["dev"] == f"swp{hop.egress_port}" and "encap" not in plain
    for result in again.values():
        assert result.ok and result.read_back, result
        assert (result.writes, result.requests) == (0, 0), result
    for name, result in back.items():
        assert result.ok, result
        assert result.deletes == len(written[name]), (name, result, written[name])
    assert all(not _usid_routes(fabric_lab, name) for name in SWITCHES)
