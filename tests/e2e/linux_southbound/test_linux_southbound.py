"""The linux southbound against real namespaces: what program() writes, that packets follow
it, that a second program() writes nothing, and that a cut is reported and routed around by
the kernel itself.

Root only (skips otherwise); run under the shared lock:
``flock /tmp/mrc-heavy.lock .venv/bin/pytest tests/e2e/linux_southbound``.
"""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from controller.intent import compute_intent
from controller.southbound.interface import ProgramResult
from controller.southbound.linux.names import ROUTE_PROTOCOL, gateway_v4, gateway_v6
from controller.southbound.linux.namespace import SwitchNamespace
from controller.southbound.linux.southbound import LinuxSouthbound
from hostenv.netns import NetnsLab
from hostenv.tbf import FRAME_BYTES, tbf_parameters
from tests.e2e.linux_southbound.conftest import skip_reason
from tests.e2e.linux_southbound.kernel_lab import KernelFabricLab, udp_flows_arrive
from tests.e2e.linux_southbound.southbound_driver import running_southbound, wait_until
from topologies.model import Endpoint, Topology

pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

SWITCHES = ("l1", "l2", "s1", "s2")
#: 64 flows: with two equal paths, the chance that the L4 hash puts all on one is 2^-63.
SOURCE_PORTS = tuple(range(40000, 40064))


async def program_all(
    southbound: LinuxSouthbound, topology: Topology, *, read_back: bool = False
) -> dict[str, ProgramResult]:
    intent = compute_intent(topology)
    results = await asyncio.gather(
        *(southbound.program(intent.switch(name), read_back=read_back) for name in SWITCHES)
    )
    return {result.switch: result for result in results}


def h2_address(topology: Topology, version: int) -> str:
    nic = topology.host("h2").nics[0]
    return str(nic.ipv4.ip if version == 4 else nic.ipv6.ip)


def test_program_writes_multipath_routes_via_gateways_with_permanent_neighbours(
    fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    async def scenario() -> dict[str, ProgramResult]:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            return await program_all(southbound, small_topology)

    results = asyncio.run(scenario())
    assert all(result.ok for result in results.values()), results
    routes = json.loads(
        fabric_lab.run_in("l1", ["ip", "-j", "-4", "route", "show", "proto", str(ROUTE_PROTOCOL)])
    )
    to_h2 = next(route for route in routes if route["dst"] == h2_address(small_topology, 4))
    hops = {(hop["dev"], hop["gateway"]) for hop in to_h2["nexthops"]}
    members = {m.egress_port: m for m in compute_intent(small_topology).switch("l1").members}
    assert hops == {
        ("swp2", str(gateway_v4(members[2].member_index))),
        ("swp3", str(gateway_v4(members[3].member_index))),
    }
    routes6 = json.loads(
        fabric_lab.run_in("l1", ["ip", "-j", "-6", "route", "show", "proto", str(ROUTE_PROTOCOL)])
    )
    to_h2_v6 = next(route for route in routes6 if route["dst"] == h2_address(small_topology, 6))
    assert {hop["dev"] for hop in to_h2_v6["nexthops"]} == {"swp2", "swp3"}
    neighbours = json.loads(
        fabric_lab.run_in("l1", ["ip", "-j", "neigh", "show", "nud", "permanent"])
    )
    held = {(entry["dst"], entry["dev"], entry["lladdr"]) for entry in neighbours}
    s1_port_mac = small_topology.switch("s1").port_mac(1)
    assert (str(gateway_v4(members[2].member_index)), "swp2", s1_port_mac) in held
    assert (str(gateway_v6(members[2].member_index)), "swp2", s1_port_mac) in held


def test_switch_sysctls_forward_with_l4_hash_and_skip_linkdown_routes(
    fabric_lab: KernelFabricLab,
) -> None:
    async def scenario() -> None:
        async with running_southbound(SWITCHES, fabric_lab.prefix):
            pass

    asyncio.run(scenario())
    keys = [
        "net.ipv4.ip_forward",
        "net.ipv6.conf.all.forwarding",
        "net.ipv4.fib_multipath_hash_policy",
        "net.ipv6.fib_multipath_hash_policy",
        "net.ipv4.conf.swp2.ignore_routes_with_linkdown",
        "net.ipv6.conf.swp2.ignore_routes_with_linkdown",
        "net.ipv4.conf.all.rp_filter",
        "net.ipv4.conf.swp2.send_redirects",
    ]
    values = fabric_lab.run_in("l1", ["sysctl", "-n", *keys]).split()
    assert values == ["1", "1", "1", "1", "1", "1", "0", "0"]


def test_hosts_reach_each_other_over_ipv4_and_ipv6(
    fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    async def scenario() -> None:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            await program_all(southbound, small_topology)

    asyncio.run(scenario())
    for version in (4, 6):
        fabric_lab.run_in(
            "h1", ["ping", f"-{version}", "-c", "2", "-W", "2", h2_address(small_topology, version)]
        )


def test_second_program_reads_back_and_writes_nothing(
    fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    async def scenario() -> tuple[dict[str, ProgramResult], dict[str, ProgramResult]]:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            first = await program_all(southbound, small_topology)
            again = await program_all(southbound, small_topology, read_back=True)
            return first, again

    first, again = asyncio.run(scenario())
    assert all(result.ok for result in first.values())
    for result in again.values():
        assert result.ok and result.read_back
        assert (result.writes, result.queue_commands, result.requests) == (0, 0, 0)


def test_queue_rate_becomes_a_tbf_of_full_frames(
    fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    async def scenario() -> None:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            await program_all(southbound, small_topology)

    asyncio.run(scenario())
    # The root only: where the kernel has an ECN qdisc, the marker hangs under the tbf.
    shown = json.loads(fabric_lab.run_in("l1", ["tc", "-j", "qdisc", "show", "dev", "swp3"]))
    (qdisc,) = [entry for entry in shown if entry.get("root")]
    assert qdisc["kind"] == "tbf"
    assert qdisc["options"]["rate"] == 2000 * FRAME_BYTES  # tc shows bytes per second
    expected = tbf_parameters(2000, small_topology.link_at("l1", 3).params.queue_depth)  # type: ignore[union-attr]
    # tc prints the bucket converted back from timer ticks with its own truncations (a few
    # bytes off); the southbound's own read-back is exact to a byte (the no-op test shows it).
    assert abs(qdisc["options"]["burst"] - expected.burst_bytes) <= expected.burst_bytes / 200
    (unshaped,) = json.loads(fabric_lab.run_in("l1", ["tc", "-j", "qdisc", "show", "dev", "swp2"]))
    assert unshaped["kind"] == "noqueue"


def test_cut_is_reported_and_its_linkdown_next_hop_skipped_at_once(
    fabric_lab: KernelFabricLab, small_topology: Topology
) -> None:
    """Only the southbound runs (no controller recomputes anything): the kernel alone must
    stop hashing onto the dead uplink, and every flow must still arrive."""
    far_end = Endpoint("s1", 1)  # l1 port 2's neighbour
    destination = h2_address(small_topology, 4)

    async def scenario() -> None:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, events):
            await program_all(southbound, small_topology)
            before = await southbound.read_counters("l1", [2, 3], [])
            arrived = await asyncio.to_thread(
                udp_flows_arrive, fabric_lab, "h1", "h2", destination, SOURCE_PORTS
            )
            spread = await southbound.read_counters("l1", [2, 3], [])
            assert arrived == set(SOURCE_PORTS)
            for port in (2, 3):  # the L4 hash used both uplinks
                assert spread.ports[port].tx_packets > before.ports[port].tx_packets
            fabric_lab.set_port(far_end, False)
            try:
                await wait_until(
                    lambda: ("l1", 2, False) in events.port_changes, "l1 port 2 carrier loss"
                )
                cut = await southbound.read_counters("l1", [2, 3], [])
                arrived = await asyncio.to_thread(
                    udp_flows_arrive, fabric_lab, "h1", "h2", destination, SOURCE_PORTS
                )
                after = await southbound.read_counters("l1", [2, 3], [])
                assert arrived == set(SOURCE_PORTS)
                assert after.ports[2].tx_packets == cut.ports[2].tx_packets
            finally:
                fabric_lab.set_port(far_end, True)
            await wait_until(lambda: events.port_changes[-1] == ("l1", 2, True), "carrier back")

    asyncio.run(scenario())


def test_counters_are_per_interface_and_say_members_are_not_counted(
    fabric_lab: KernelFabricLab,
) -> None:
    async def scenario() -> None:
        async with running_southbound(SWITCHES, fabric_lab.prefix) as (southbound, _):
            counters = await southbound.read_counters("l1", [1, 2, 3, 9], [0, 1, 2])
            assert set(counters.ports) == {1, 2, 3}  # no swp9
            assert counters.members == {}
            assert any(note.startswith("members:") for note in counters.not_counted)

    asyncio.run(scenario())


def test_namespace_removed_disconnects_and_a_new_one_reconnects() -> None:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)

    async def scenario(lab: NetnsLab) -> None:
        async with running_southbound(["x1"], lab.prefix, wait_connected=False) as (sb, events):
            await asyncio.sleep(0.3)
            assert events.connected == []  # nothing to connect to yet
            name = lab.add_netns("x1")
            await wait_until(lambda: events.connected_switches() == {"x1"}, "connected")
            await asyncio.to_thread(lab.namespaces.remove, name)
            await asyncio.to_thread(_delete_netns, name)
            await wait_until(lambda: events.disconnected == ["x1"], "disconnected")
            result = await sb.program(compute_intent(_empty_switch_topology()).switch("x1"))
            assert not result.ours and result.error is not None
            lab.add_netns("x1")
            await wait_until(lambda: len(events.connected) == 2, "connected again")

    with NetnsLab() as lab:
        asyncio.run(scenario(lab))


def _delete_netns(name: str) -> None:
    from hostenv.netns import run

    run(["ip", "netns", "del", name])


def _empty_switch_topology() -> Topology:
    from topologies import load_topology_text

    return load_topology_text(
        "name: one\nplanes:\n- {id: 0}\nswitches:\n- {name: x1, role: leaf, device_id: 1}\n",
        source="one",
    )


def test_opening_namespaces_never_delivers_a_signal_to_this_process(
    fabric_lab: KernelFabricLab,
) -> None:
    """pyroute2 stops the forked helper that opens a namespace socket with SIGTERM: it must
    never reach this process's handlers (a controller stops on SIGTERM)."""
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))

    async def scenario() -> None:
        for _ in range(20):
            namespace = await SwitchNamespace.open(fabric_lab.namespace("l1"))
            namespace.close()

    try:
        asyncio.run(scenario())
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == []
