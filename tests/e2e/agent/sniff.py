"""Capture the MRC packets on one interface and print what their headers said, as JSON.

Run inside a namespace (``ip netns exec NS python -m tests.e2e.agent.sniff IFNAME SECONDS``)
while the agents talk, and stop it with SIGTERM (or let SECONDS pass) once they are done:
it then prints its findings. An AF_PACKET socket sees both directions, and each UDP 4791 packet is
summarised by the fields the agent is responsible for (IPv4 ID and DF, DSCP, ECN, UDP ports,
IPv6 flow label, BTH opcode). The test then checks them against the MRC rules.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
ROCEV2_PORT = 4791


def summarise(frame: bytes) -> dict[str, object] | None:
    """The header fields of an MRC frame, or None for anything else."""
    if len(frame) < 14:
        return None
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    if ethertype == 0x0800 and len(frame) >= 14 + 28:
        ihl = (frame[14] & 0x0F) * 4
        tos = frame[15]
        ip_id, flags_fragment = struct.unpack_from(">HH", frame, 18)
        proto = frame[23]
        udp = 14 + ihl
        fields: dict[str, object] = {
            "ip": 4,
            "ip_id": ip_id,
            "df": bool(flags_fragment & 0x4000),
            "flow_label": None,
        }
    elif ethertype == 0x86DD and len(frame) >= 14 + 48:
        word = struct.unpack_from(">I", frame, 14)[0]
        tos = (word >> 20) & 0xFF
        proto = frame[20]
        udp = 14 + 40
        fields = {"ip": 6, "ip_id": None, "df": None, "flow_label": word & 0xFFFFF}
    else:
        return None
    if proto != 17 or len(frame) < udp + 9:
        return None
    sport, dport = struct.unpack_from(">HH", frame, udp)
    if dport != ROCEV2_PORT:
        return None
    fields.update(dscp=tos >> 2, ecn=tos & 3, sport=sport, dport=dport, opcode=frame[udp + 8])
    return fields


def capture(ifname: str, seconds: float) -> list[dict[str, object]]:
    """Every MRC packet seen on ``ifname`` for ``seconds`` or until SIGTERM: what the kernel
    had captured by then included (read out of the socket before returning), so a transfer
    that completed before the SIGTERM is in the result whole, however far behind this
    process was."""
    stop = []
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.append(True))
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: keep up with bursts
    sock.bind((ifname, 0))
    sock.settimeout(0.2)
    packets: list[dict[str, object]] = []
    deadline = time.monotonic() + seconds
    print("sniffing", flush=True)
    while time.monotonic() < deadline and not stop:
        try:
            frame, address = sock.recvfrom(65535)
        except TimeoutError:
            continue
        _keep(packets, frame, address)
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while True:
            _keep(packets, *sock.recvfrom(65535))
    sock.close()
    return packets


def _keep(packets: list[dict[str, object]], frame: bytes, address: tuple[object, ...]) -> None:
    fields = summarise(frame)
    if fields is not None:
        fields["outgoing"] = address[2] == PACKET_OUTGOING
        packets.append(fields)


if __name__ == "__main__":
    result = capture(sys.argv[1], float(sys.argv[2]))
    print(json.dumps(result), flush=True)
