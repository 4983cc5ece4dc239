"""The leaf-spine preset in Mininet on each switch target, programmed from
``controller.intent``: hosts and switch ports configured as specified, every host reaches every
other over IPv4 and IPv6, link cuts only ever take carrier away from a switch and are routed
around, a restarted BMv2 comes back (a kernel switch refuses restarts), and queue limits reach
the switch.

One network per target serves the whole module (conftest); every test that changes it puts it
back. On bmv2 the fabric is programmed by a stand-in (``fabric_program``), on linux by the
real controller (``controller_fabric``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from controller.intent import compute_intent
from hostenv.tbf import FRAME_BYTES
from testbed.mininet.host_config import GATEWAY_IPV4, GATEWAY_IPV6
from tests.e2e.mininet.fabric_program import MEMBER_COUNTER
from tests.e2e.mininet.fabrics import Fabric, programmed_fabric
from tests.e2e.mininet.machine_state import eventually, netns_exec
from tests.e2e.mininet.pings import ping, ping_address, ping_all

pytestmark = pytest.mark.mininet
PRESET = "leaf-spine"

#: BMv2 polls link state every 200 ms (docs/bmv2.md) and PI's watch-port enforcer
#: reacts after that: the longest the tests wait for a cut or restore to take effect.
LINK_STATE_TIMEOUT_S = 15.0
#: How long a reachability check retries: on a loaded machine (two cores shared with builds and
#: other runs) BMv2's pcap receive path can lose an echo request now and then.
REACH_TIMEOUT_S = 10.0
#: ICMP payload that makes an IPv4 echo request a full MRC data frame (Ethernet 14, IPv4 20,
#: ICMP 8 bytes of headers), the frame size a kernel switch's queue rate is counted in.
FULL_FRAME_PAYLOAD = FRAME_BYTES - 14 - 20 - 8
#: ethtool's names of the offloads the bring-up turns off.
OFFLOAD_NAMES = (
    "rx-checksumming",
    "tx-checksumming",
    "scatter-gather",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
)


@pytest.fixture(scope="module")
def network(preset_network):
    return preset_network


@pytest.fixture(scope="module")
def fabric(network) -> Iterator[Fabric]:
    """Every switch programmed with the intent of the fabric with every link up."""
    with programmed_fabric(network, PRESET) as programmed:
        yield programmed


def _only_on_bmv2(network, why: str) -> None:
    if network.target != "bmv2":
        pytest.skip(f"not applicable on {network.target}: {why}")


def _assert_all_reach_all(network, wait: float = REACH_TIMEOUT_S) -> None:
    """Every pair, both families, without loss, within ``wait`` seconds of retrying."""
    results = eventually(
        lambda: ping_all(network), lambda rs: all(r.lossless for r in rs), timeout=wait
    )
    lossy = [str(result) for result in results if not result.lossless]
    assert not lossy, f"lost pings: {lossy}; {_switch_exits(network)}"


def _wait_link(network, a: str, b: str, up: bool) -> None:
    """Wait until the BMv2s at both switch ends see the link up (or down)."""
    state = eventually(
        lambda: network.link_state(a, b),
        lambda ends: all(is_up == up for is_up in ends.values()),
        timeout=LINK_STATE_TIMEOUT_S,
    )
    assert all(is_up == up for is_up in state.values()), f"{a}-{b}: {state}"


def _switch_exits(network) -> str:
    """Which BMv2s are no longer running (a lost ping is often a crashed switch)."""
    if network.target != "bmv2":
        return f"kernel switches (target {network.target}) cannot crash"
    exits = {
        switch.name: switch.process.poll()
        for switch in network.mininet.switches
        if switch.process.poll() is not None
    }
    return f"switches exited (status): {exits}" if exits else "every switch runs"


def _link_flags(netns: str | None, ifname: str) -> set[str]:
    output = netns_exec(netns, "ip", "-o", "link", "show", "dev", ifname)
    match = re.search(r"<([^>]*)>", output)
    assert match, output
    return set(match.group(1).split(","))


# -- bring-up as specified -----------------------------------------------------------------------
def test_every_switch_runs_bmv2_with_the_projects_options_and_no_program(network):
    _only_on_bmv2(network, "kernel switches run no switch process")
    for switch in network.topology.switches:
        node = network.switch(switch.name)
        args = Path(f"/proc/{node.bmv2_pid}/cmdline").read_bytes().decode().split("\0")
        options = dict(itertools.pairwise(args))
        assert "--no-p4" in args
        assert options["--device-id"] == str(switch.device_id)
        assert options["--thrift-port"] == str(switch.thrift_port)
        assert options["--grpc-server-addr"] == f"127.0.0.1:{switch.grpc_port}"
        assert options["--priority-queues"] == "3"  # normal, lossless RoCE class, high
        assert options["--cpu-port"] == str(network.topology.settings.cpu_port)
        assert options["--log-level"] == "warn"
        assert int(options["--log-file-max-size"]) * (int(options["--log-file-max-files"]) + 1) <= (
            10 * 1024 * 1024
        )
        bound = {value for flag, value in itertools.pairwise(args) if flag == "-i"}
        assert bound == {f"{p}@{i}" for p, i in network.wiring.switch_ports[switch.name].items()}


def test_every_kernel_switch_port_is_swp_n_in_its_namespace_up_with_ipv6_and_its_mac(network):
    if network.target != "linux":
        pytest.skip(f"kernel switches only (target {network.target})")
    for switch in network.topology.switches:
        netns = network.switch_netns(switch.name)
        assert netns == f"{network.prefix}-{switch.name}"
        for port in network.topology.switch_ports(switch.name):
            ifname = f"swp{port}"
            shown = netns_exec(netns, "ip", "-o", "link", "show", "dev", ifname)
            assert f"link/ether {switch.port_mac(port)} " in shown, shown
            assert "UP" in _link_flags(netns, ifname)
            disabled = netns_exec(netns, "sysctl", "-n", f"net.ipv6.conf.{ifname}.disable_ipv6")
            assert disabled.strip() == "0", f"{switch.name} {ifname}: IPv6 off"
        assert "UP" in _link_flags(netns, "lo")


def test_offloads_are_off_on_both_ends_of_every_veth(network):
    ends: list[tuple[str | None, str]] = []
    for switch, ports in network.wiring.switch_ports.items():
        ends += [(network.switch_netns(switch), ifname) for ifname in ports.values()]
    ends += [(nic.netns, nic.nic.name) for nic in network.wiring.host_nics]
    ends += [
        (network.wiring.patch_panel_netns, end.panel_ifname)
        for patch in network.wiring.patches
        for end in patch.ends
    ]
    assert len(ends) == 2 * len(network.topology.all_links) + 2 * len(network.topology.links)
    for netns, ifname in ends:
        features = dict(
            re.findall(r"^([a-z-]+): (on|off)", netns_exec(netns, "ethtool", "-k", ifname), re.M)
        )
        still_on = [name for name in OFFLOAD_NAMES if features.get(name) != "off"]
        assert not still_on, f"{ifname} ({netns or 'root'}): {still_on} still on"


def test_host_addresses_are_usable_at_once_and_gateways_need_no_arp_or_nd(network):
    for nic in network.wiring.host_nics:
        addresses = netns_exec(nic.netns, "ip", "-6", "addr", "show", "dev", nic.nic.name)
        assert str(nic.nic.ipv6) in addresses
        assert "tentative" not in addresses
        neighbours = netns_exec(nic.netns, "ip", "neigh", "show", "dev", nic.nic.name)
        for gateway in (GATEWAY_IPV4, GATEWAY_IPV6):
            assert f"{gateway} lladdr {nic.gateway_mac} PERMANENT" in neighbours


# -- forwarding --------------------------------------------------------------------------------
def test_every_host_reaches_every_other_over_ipv4_and_ipv6(network, fabric):
    _assert_all_reach_all(network)


def test_a_spine_link_cut_only_takes_the_patch_ends_down(network, fabric):
    link_id = network.cut("l1", "s2")
    try:
        patch = network.wiring.patch_for(link_id)
        for end in patch.ends:
            switch_side = _link_flags(network.switch_netns(end.switch), end.switch_ifname)
            # Admin state untouched (a BMv2-bound interface set down freezes BMv2): carrier only.
            assert {"UP", "NO-CARRIER"} <= switch_side
            assert "UP" not in _link_flags(network.wiring.patch_panel_netns, end.panel_ifname)
        assert network.cut_links == {link_id}
        _wait_link(network, "l1", "s2", up=False)
    finally:
        network.restore("l1", "s2")
    for end in patch.ends:
        assert {"UP", "LOWER_UP"} <= _link_flags(
            network.switch_netns(end.switch), end.switch_ifname
        )
    assert network.cut_links == frozenset()
    _wait_link(network, "l1", "s2", up=True)


def test_watch_port_moves_a_flow_off_a_cut_spine_link_without_any_controller(network, fabric):
    _only_on_bmv2(network, "the kernel has no per-member counters to follow a flow with")
    # One-way traffic: echo requests to an unused address behind l2, which l2 drops (no
    # route). A reply could hash onto the cut spine, whose only member toward l1 is then
    # down: see fabric_program on what BMv2 does with a group whose members are all down.
    behind_l2 = network.topology.host("h3").nics[0].ipv4.network
    used_addresses = {nic.ipv4.ip for _, nic in network.topology.nics()}
    silent = next(address for address in behind_l2.hosts() if address not in used_addresses)
    uplinks = compute_intent(network.topology).switch("l1").lookup(silent)
    assert uplinks is not None and len(uplinks.members) == 4

    def member_counts() -> dict[int, int]:
        return {
            m.member_index: fabric.counter("l1", MEMBER_COUNTER, m.member_index)
            for m in uplinks.members
        }

    def send_five() -> None:
        assert ping_address(network, "h1", str(silent), count=5).received == 0

    def sent_five() -> tuple[dict[int, int], dict[int, int]]:
        before = member_counts()
        send_five()
        # A loaded BMv2 may still hold the last request when ping gives up on its reply.
        return before, eventually(
            member_counts,
            lambda counts: sum(counts[i] - before[i] for i in counts) >= 5,
            LINK_STATE_TIMEOUT_S,
        )

    def all_on_one_member(counts: tuple[dict[int, int], dict[int, int]]) -> bool:
        before, after = counts
        return max(after[i] - before[i] for i in after) >= 5

    # A member an earlier test cut may still be rejoining the group (PI re-activates watched
    # members through a queue), which moves the flow mid-ping: send until one member has all.
    before, after = eventually(sent_five, all_on_one_member, LINK_STATE_TIMEOUT_S)
    used = [m for m in uplinks.members if after[m.member_index] - before[m.member_index] >= 5]
    assert len(used) == 1, "one ICMP flow hashes onto one uplink"
    spine = network.topology.link_at("l1", used[0].egress_port).far_end("l1").node

    def traffic_moved() -> tuple[dict[int, int], dict[int, int]]:
        before = member_counts()
        send_five()
        return before, member_counts()

    def off_the_cut_member(counts: tuple[dict[int, int], dict[int, int]]) -> bool:
        before, after = counts
        return after[used[0].member_index] == before[used[0].member_index]

    def back_on_it(counts: tuple[dict[int, int], dict[int, int]]) -> bool:
        before, after = counts
        return after[used[0].member_index] - before[used[0].member_index] >= 5

    network.cut("l1", spine)
    try:
        _wait_link(network, "l1", spine, up=False)
        before, after = eventually(traffic_moved, off_the_cut_member, LINK_STATE_TIMEOUT_S)
    finally:
        network.restore("l1", spine)
        _wait_link(network, "l1", spine, up=True)
    assert after[used[0].member_index] == before[used[0].member_index]
    moved = sum(after[i] - before[i] for i in after if i != used[0].member_index)
    assert moved >= 5
    # Restored, the member is active again and the flow hashes back onto it.
    assert back_on_it(eventually(traffic_moved, back_on_it, LINK_STATE_TIMEOUT_S))


def test_every_host_reaches_every_other_once_the_groups_follow_a_spine_link_cut(network, fabric):
    link_id = network.cut("l2", "s3")
    try:
        # Reprogram once BMv2 has seen the cut: see fabric_program on the race otherwise.
        _wait_link(network, "l2", "s3", up=False)
        fabric.program(down={link_id})
        _assert_all_reach_all(network)
    finally:
        network.restore("l2", "s3")
        _wait_link(network, "l2", "s3", up=True)
        fabric.program()
    _assert_all_reach_all(network)


def test_a_cut_host_link_is_unreachable_and_forwards_again_once_restored(network, fabric):
    link_id = network.cut("h4", "l2")
    try:
        assert "UP" not in _link_flags(network.host("h4").netns, "eth0")
        nic = network.wiring.nic_for(link_id)
        assert {"UP", "NO-CARRIER"} <= _link_flags(
            network.switch_netns(nic.nic.switch), nic.switch_ifname
        )
        # What the controller does on the cut, before any packet meets the dead port.
        _wait_link(network, "h4", "l2", up=False)
        fabric.program(down={link_id})
        assert ping(network, "h1", "h4", count=2).received == 0
    finally:
        network.restore("h4", "l2")
        _wait_link(network, "h4", "l2", up=True)
        fabric.program()
    for family in (4, 6):
        for source, target in (("h1", "h4"), ("h4", "h2")):
            result = eventually(
                partial(ping, network, source, target, family=family),
                lambda r: r.lossless,
                timeout=LINK_STATE_TIMEOUT_S,
            )
            assert result.lossless, str(result)


def test_traffic_into_a_cut_host_link_is_dropped_and_the_switch_lives_on(network, fabric):
    """Before any controller reacts, a leaf's one-member group toward a cut host still gets
    packets. It watches no port (BMv2 dies with SIGFPE on a group whose every member is down),
    so they die at the dead port and the switch keeps forwarding everything else."""
    _only_on_bmv2(network, "a kernel switch has no watch_port or process to crash")
    network.cut("h4", "l2")
    try:
        _wait_link(network, "h4", "l2", up=False)
        for family in (4, 6):
            assert ping(network, "h1", "h4", count=3, family=family).received == 0
        assert network.switch("l2").process.poll() is None, _switch_exits(network)
        assert ping(network, "h1", "h3", count=3).lossless, _switch_exits(network)
    finally:
        network.restore("h4", "l2")
        _wait_link(network, "h4", "l2", up=True)
    _assert_all_reach_all(network, wait=LINK_STATE_TIMEOUT_S)


def test_a_kernel_switch_refuses_a_restart_and_keeps_forwarding(network, fabric):
    if network.target != "linux":
        pytest.skip(f"kernel switches only (target {network.target})")
    from testbed.mininet import NotApplicable

    with pytest.raises(NotApplicable, match="restart does not apply to the linux target"):
        network.restart_switch("l1")
    _assert_all_reach_all(network)


def test_a_restarted_switch_is_empty_until_reprogrammed_then_forwards_again(network, fabric):
    _only_on_bmv2(network, "a kernel switch has no process to restart")
    old_pid = network.switch("l1").bmv2_pid
    new_pid = network.restart_switch("l1")
    try:
        assert new_pid != old_pid
        assert network.switch("l1").bmv2_pid == new_pid
        assert ping(network, "h1", "h3", count=2).received == 0
    finally:
        fabric.reprogram("l1")
    _assert_all_reach_all(network)


def test_a_queue_limit_throttles_that_port_only(network, fabric):
    to_h1 = network.topology.host("h1").nics[0].switch_port
    # Full-size frames: BMv2 counts packets, a kernel's tbf counts bytes of FRAME_BYTES each.
    full = FULL_FRAME_PAYLOAD
    network.set_queue("l1", to_h1, rate_pps=2, depth=1)
    try:
        throttled = ping(network, "h3", "h1", count=20, interval=0.01, size=full)
        untouched = ping(network, "h3", "h2", count=20, interval=0.01, size=full)
    finally:
        network.set_queue("l1", to_h1, rate_pps=0, depth=64)
    # 20 requests in 0.2 s into a 2 packets/s queue of depth 1: most are dropped at l1.
    assert throttled.received <= throttled.sent // 2, str(throttled)
    assert untouched.received > untouched.sent // 2, str(untouched)
    restored = eventually(
        partial(ping, network, "h3", "h1", count=20, interval=0.01),
        lambda r: r.lossless,
        timeout=REACH_TIMEOUT_S,
    )
    assert restored.lossless, str(restored)


@pytest.mark.parametrize(
    ("switch", "port", "rate", "depth", "message"),
    [
        ("l1", 9, 100, 10, "l1 has no port 9"),
        ("l1", 1, -1, 10, "rate must be >= 0"),
        ("l1", 1, 100, 0, "depth must be at least 1"),
    ],
)
def test_set_queue_rejects_bad_arguments_before_touching_the_switch(
    network, switch, port, rate, depth, message
):
    with pytest.raises(ValueError, match=message):
        network.set_queue(switch, port, rate_pps=rate, depth=depth)


def test_a_kernel_switch_has_one_queue_per_port(network):
    if network.target != "linux":
        pytest.skip(f"kernel switches only (target {network.target})")
    with pytest.raises(ValueError, match=r"one queue per port .* priority must be 0, not 1"):
        network.set_queue("l1", 1, rate_pps=100, depth=10, priority=1)
