"""Following the planes' ports over netlink (``agent.io.carrier``).

Messages are built here byte by byte from the kernel's struct layouts, and cross-checked once
against pyroute2's encoder (an independent implementation of the same ABI). The watch runs on
a datagram socketpair standing in for the netlink socket; one test reads the real kernel (no
root needed to read link state).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from agent.core import MrcConfig, OutgoingDatagram
from agent.io.addresses import PeerAddress
from agent.io.carrier import (
    IFF_RUNNING,
    IFF_UP,
    NLM_F_DUMP,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSG_HEADER,
    RTM_DELLINK,
    RTM_GETADDR,
    RTM_GETLINK,
    RTM_NEWADDR,
    RTM_NEWLINK,
    AddressOn,
    DumpEnd,
    LinkState,
    MalformedNetlink,
    PlaneLinks,
    PortWatch,
    parse,
)
from agent.io.inbound import InboundPolicy, SideChannelServer
from agent.io.perf_transfer import PerfTransfer
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import memory_link, run_until

UP = IFF_UP | IFF_RUNNING
#: Two planes per host (addresses as the memory link carries them).
CLIENT = (bytes([10, 1, 0, 1]), bytes([10, 2, 0, 1]))
SERVER = (bytes([10, 1, 0, 2]), bytes([10, 2, 0, 2]))


# --- messages as the kernel writes them ---------------------------------------------------


def _attr(kind: int, value: bytes) -> bytes:
    length = 4 + len(value)
    return struct.pack("=HH", length, kind) + value + b"\0" * (-length % 4)


def _message(kind: int, body: bytes, seq: int = 0) -> bytes:
    return NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), kind, 0, seq, 0) + body


def link(index: int, name: str, flags: int, seq: int = 0, kind: int = RTM_NEWLINK) -> bytes:
    body = struct.pack("=BxHiII", socket.AF_UNSPEC, 1, index, flags, 0xFFFFFFFF)
    body += _attr(16, bytes([6 if flags & IFF_RUNNING else 2]))  # IFLA_OPERSTATE
    body += _attr(3, name.encode() + b"\0")  # IFLA_IFNAME
    return _message(kind, body, seq)


def address(index: int, packed: bytes, seq: int = 0) -> bytes:
    family = socket.AF_INET if len(packed) == 4 else socket.AF_INET6
    body = struct.pack("=BBBBI", family, 24, 0, 0, index)
    body += _attr(1, packed)  # IFA_ADDRESS
    if family == socket.AF_INET:
        body += _attr(2, packed)  # IFA_LOCAL
    body += _attr(3, b"eth\0")  # IFA_LABEL: ignored
    return _message(RTM_NEWADDR, body, seq)


def done(seq: int) -> bytes:
    return _message(NLMSG_DONE, struct.pack("=i", 0), seq)


# --- parsing ------------------------------------------------------------------------------


def test_link_messages_say_up_only_with_both_up_and_running():
    data = link(2, "p0", UP) + link(3, "p1", IFF_UP) + link(4, "p2", 0)
    data += link(5, "p3", UP, kind=RTM_DELLINK)
    assert parse(data) == [
        LinkState(2, "p0", True),
        LinkState(3, "p1", False),  # administratively up, no carrier
        LinkState(4, "p2", False),
        LinkState(5, "p3", False),  # removed
    ]


def test_address_messages_name_the_interface_of_each_address():
    v6 = bytes.fromhex("fd000000000000000000000000000001")
    data = address(7, CLIENT[0]) + address(8, v6) + done(5)
    assert parse(data) == [AddressOn(7, CLIENT[0]), AddressOn(8, v6), DumpEnd(5)]


def test_an_error_answer_ends_the_dump_it_answers_and_an_acknowledgement_does_not():
    refused = _message(NLMSG_ERROR, struct.pack("=i", -16) + b"\0" * 16, seq=3)
    acknowledged = _message(NLMSG_ERROR, struct.pack("=i", 0) + b"\0" * 16, seq=4)
    assert parse(refused + acknowledged) == [DumpEnd(3, 16)]


def test_other_message_types_are_skipped():
    route = _message(24, b"\0" * 12)  # RTM_NEWROUTE
    assert parse(route + link(2, "p0", UP)) == [LinkState(2, "p0", True)]


@pytest.mark.parametrize(
    "data",
    [
        NLMSG_HEADER.pack(8, RTM_NEWLINK, 0, 0, 0),  # shorter than its own header
        NLMSG_HEADER.pack(400, RTM_NEWLINK, 0, 0, 0) + b"\0" * 16,  # longer than the read
        _message(RTM_NEWLINK, b"\0" * 8),  # no room for struct ifinfomsg
        _message(RTM_NEWLINK, struct.pack("=BxHiII", 0, 1, 2, UP, 0) + struct.pack("=HH", 40, 3)),
        _message(RTM_NEWADDR, b"\0" * 4),
        _message(NLMSG_ERROR, b""),
    ],
)
def test_lengths_that_do_not_add_up_are_malformed(data):
    with pytest.raises(MalformedNetlink):
        parse(data)


def test_messages_pyroute2_encodes_parse_alike():
    ifinfmsg = pytest.importorskip("pyroute2.netlink.rtnl.ifinfmsg").ifinfmsg
    ifaddrmsg = pytest.importorskip("pyroute2.netlink.rtnl.ifaddrmsg").ifaddrmsg
    message = ifinfmsg()
    message["header"]["type"] = RTM_NEWLINK
    message["index"] = 9
    message["flags"] = UP
    message["attrs"] = [("IFLA_IFNAME", "h1-eth0"), ("IFLA_MTU", 1500)]
    message.encode()
    added = ifaddrmsg()
    added["header"]["type"] = RTM_NEWADDR
    added["family"] = socket.AF_INET
    added["prefixlen"] = 24
    added["index"] = 9
    added["attrs"] = [("IFA_ADDRESS", "10.1.0.1"), ("IFA_LOCAL", "10.1.0.1")]
    added.encode()
    assert parse(bytes(message.data) + bytes(added.data)) == [
        LinkState(9, "h1-eth0", True),
        AddressOn(9, CLIENT[0]),
    ]


# --- which planes are up ------------------------------------------------------------------


def test_a_plane_follows_the_link_of_the_interface_holding_its_address():
    links = PlaneLinks(CLIENT)
    assert links.feed([AddressOn(7, CLIENT[0]), AddressOn(8, CLIENT[1])]) == []
    assert links.feed([LinkState(7, "p0", True), LinkState(8, "p1", False)]) == [(1, False)]
    assert links.feed([LinkState(8, "p1", False)]) == []  # no change, nothing reported
    assert links.feed([LinkState(9, "other", False)]) == []
    assert links.feed([LinkState(8, "p1", True), LinkState(7, "p0", False)]) == [
        (0, False),
        (1, True),
    ]
    assert links.interface_name(0) == "p0"


def test_a_plane_whose_address_is_on_no_interface_counts_as_up():
    links = PlaneLinks(CLIENT)
    assert links.feed([LinkState(7, "p0", False)]) == []
    assert links.up == [True, True]
    assert links.interface_name(0) is None


def test_an_address_that_moves_takes_its_plane_to_the_new_interface():
    links = PlaneLinks(CLIENT)
    links.feed([AddressOn(7, CLIENT[0]), LinkState(7, "p0", False), LinkState(9, "q0", True)])
    assert links.up[0] is False
    assert links.feed([AddressOn(9, CLIENT[0])]) == [(0, True)]


# --- the watch on its socket --------------------------------------------------------------


class FakeKernel:
    """The kernel's end of a datagram socketpair that stands in for the netlink socket."""

    def __init__(self) -> None:
        self.end, self.agent_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)

    def answer_dumps(self, addresses: bytes, links: bytes, first_seq: int = 1) -> None:
        """Queue the answers to the two start-up dumps (addresses, then links)."""
        self.end.send(addresses + done(first_seq))
        self.end.send(links + done(first_seq + 1))

    def requests(self) -> list[tuple[int, int, int]]:
        """The (type, flags, seq) of every request the watch sent so far."""
        self.end.setblocking(False)
        out = []
        while True:
            try:
                data = self.end.recv(4096)
            except BlockingIOError:
                return out
            _length, kind, flags, seq, _port = NLMSG_HEADER.unpack_from(data)
            out.append((kind, flags, seq))

    def close(self) -> None:
        self.end.close()


@pytest.fixture
def kernel() -> Iterator[FakeKernel]:
    fake = FakeKernel()
    yield fake
    fake.close()


def test_start_dumps_addresses_then_links_and_reports_only_the_planes_that_are_down(kernel):
    kernel.answer_dumps(
        address(7, CLIENT[0], seq=1) + address(8, CLIENT[1], seq=1),
        link(7, "p0", UP, seq=2) + link(8, "p1", IFF_UP, seq=2),
    )
    watch = PortWatch(CLIENT, kernel.agent_end)
    changes: list[tuple[int, bool]] = []
    watch.start(lambda plane, up: changes.append((plane, up)))
    dump = NLM_F_REQUEST | NLM_F_DUMP
    assert kernel.requests() == [(RTM_GETADDR, dump, 1), (RTM_GETLINK, dump, 2)]
    assert changes == [(1, False)]
    assert watch.planes() == [
        {"plane": 0, "interface": "p0", "up": True},
        {"plane": 1, "interface": "p1", "up": False},
    ]
    kernel.end.send(link(8, "p1", UP))
    watch.readable()
    assert changes == [(1, False), (1, True)]
    assert watch.status()["changes"] == 2
    watch.close()


def test_a_malformed_notification_is_counted_and_the_next_one_still_counts(kernel):
    kernel.answer_dumps(address(7, CLIENT[0], seq=1), link(7, "p0", UP, seq=2))
    watch = PortWatch(CLIENT[:1], kernel.agent_end)
    changes: list[tuple[int, bool]] = []
    watch.start(lambda plane, up: changes.append((plane, up)))
    kernel.end.send(NLMSG_HEADER.pack(300, RTM_NEWLINK, 0, 0, 0))
    kernel.end.send(link(7, "p0", IFF_UP))
    watch.readable()
    assert watch.malformed == 1
    assert changes == [(0, False)]
    watch.close()


# --- the runtime: a transfer between two agents, one plane's port going down and up ---------


def _plane_counter(link_end: object, counts: dict[int, int]) -> None:
    def count(datagram: OutgoingDatagram) -> bool:
        counts[datagram.plane] = counts.get(datagram.plane, 0) + 1
        return False

    link_end.drop = count  # type: ignore[attr-defined]


def test_the_runtime_keeps_new_connections_off_a_plane_whose_port_is_down(kernel):
    link_a, link_b = memory_link()
    client = AgentRuntime(CLIENT, MrcConfig(), datagram_io=link_a, seed=1, watch_ports=False)
    server = AgentRuntime(SERVER, MrcConfig(), datagram_io=link_b, seed=2, watch_ports=False)
    side = SideChannelServer(server, PeerAddress("127.0.0.1", 0), InboundPolicy(None, 1 << 24))
    peer = PeerAddress("127.0.0.1", side.address.port)
    try:
        kernel.answer_dumps(
            address(7, CLIENT[0], seq=1) + address(8, CLIENT[1], seq=1),
            link(7, "p0", IFF_UP, seq=2) + link(8, "p1", UP, seq=2),
        )
        client.watch_ports(PortWatch(CLIENT, kernel.agent_end))
        assert client.status_providers["ports"]()["planes"][0] == {
            "plane": 0,
            "interface": "p0",
            "up": False,
        }
        sent: dict[int, int] = {}
        _plane_counter(link_a, sent)
        first = PerfTransfer(client, peer, message_size=8192, total_bytes=200_000)
        first.start()
        run_until([client, server], lambda: first.finished)
        assert first.error is None
        assert sent.get(0, 0) == 0 and sent[1] > 20

        # The port comes back: the reactor reads the notification, and plane 0 carries data.
        kernel.end.send(link(7, "p0", UP))
        run_until(
            [client, server],
            lambda: client.ports is not None and all(p["up"] for p in client.ports.planes()),
        )
        sent.clear()
        second = PerfTransfer(client, peer, message_size=8192, total_bytes=200_000)
        second.start()
        run_until([client, server], lambda: second.finished)
        assert second.error is None
        assert sent[0] > 20 and sent[1] > 20
        assert second.result is not None
    finally:
        client.close()
        server.close()


# --- the real kernel ----------------------------------------------------------------------


def test_the_kernels_loopback_holds_127_0_0_1_and_is_up():
    watch = PortWatch([bytes([127, 0, 0, 1])])
    changes: list[tuple[int, bool]] = []
    watch.start(lambda plane, up: changes.append((plane, up)))
    try:
        assert changes == []
        assert watch.planes() == [{"plane": 0, "interface": "lo", "up": True}]
    finally:
        watch.close()
