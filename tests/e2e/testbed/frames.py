"""Raw frames through one fabric link, for the loss test: send a burst of tagged frames of
three kinds from one switch port and count what reaches the switch port at the other end.

    python -m tests.e2e.testbed.frames recv IFNAME     # prints "ready", then JSON counts
    python -m tests.e2e.testbed.frames send IFNAME COUNT

Both run inside the switch's namespace where it has one (``ip netns exec``). The kinds:
``roce`` (UDP to 4791), ``lldp`` (EtherType 0x88cc to the LLDP address) and ``other`` (UDP
to 4792); every frame carries ``TAG`` so that anything else on the wire is ignored. The
sender ends with an ``end`` frame (UDP to port 9) after all the others: the link keeps
frames in order, so the receiver has seen everything once it sees that one.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time

TAG = b"MRC-LOSS-TEST"
ETH_P_ALL = 0x0003
LLDP_MAC = bytes.fromhex("0180c200000e")
SOURCE_MAC = bytes.fromhex("020000000001")
DEST_MAC = bytes.fromhex("020000000002")
KINDS = {"roce": 4791, "other": 4792, "end": 9}
#: Frames sent between short pauses, so that no queue on the way overflows.
BURST = 50


def udp_frame(port: int, kind: str, index: int) -> bytes:
    """Ethernet / IPv4 / UDP to ``port`` with the tag, the kind and the index as payload."""
    payload = TAG + f" {kind} {index}".encode()
    udp = struct.pack("!HHHH", 49152, port, 8 + len(payload), 0) + payload
    addresses = bytes([10, 0, 1, 1, 10, 0, 2, 1])
    header = struct.pack("!BBHHHBB", 0x45, 0, 20 + len(udp), index & 0xFFFF, 0, 64, 17)
    # A valid header checksum: a bridge with br_netfilter drops IPv4 frames without one.
    ip = header + struct.pack("!H", _checksum(header + b"\0\0" + addresses)) + addresses
    return DEST_MAC + SOURCE_MAC + b"\x08\x00" + ip + udp


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def lldp_frame(index: int) -> bytes:
    """An LLDP frame (EtherType 0x88cc to 01:80:c2:00:00:0e) carrying the tag."""
    return LLDP_MAC + SOURCE_MAC + b"\x88\xcc" + TAG + f" lldp {index}".encode()


def classify(frame: bytes) -> str | None:
    """The kind of one of our frames, None for anything else."""
    if TAG not in frame:
        return None
    if frame[12:14] == b"\x88\xcc":
        return "lldp"
    if frame[12:14] == b"\x08\x00" and frame[23] == 17:
        port = struct.unpack("!H", frame[36:38])[0]
        return next((kind for kind, p in KINDS.items() if p == port), None)
    return None


def send(ifname: str, count: int) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((ifname, 0))
        for index in range(count):
            for frame in (udp_frame(4791, "roce", index), lldp_frame(index)):
                sock.send(frame)
            sock.send(udp_frame(4792, "other", index))
            if index % BURST == BURST - 1:
                time.sleep(0.005)
        time.sleep(0.05)
        sock.send(udp_frame(9, "end", 0))


def receive(ifname: str, deadline_s: float) -> dict[str, int]:
    counts = {"roce": 0, "lldp": 0, "other": 0}
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.bind((ifname, 0))
        sock.settimeout(1.0)
        print("ready", flush=True)
        give_up = time.monotonic() + deadline_s
        while time.monotonic() < give_up:
            try:
                frame, address = sock.recvfrom(65535)
            except TimeoutError:
                continue
            if address[2] == socket.PACKET_OUTGOING:
                continue
            kind = classify(frame)
            if kind == "end":
                return counts
            if kind is not None:
                counts[kind] += 1
    counts["timed_out"] = 1
    return counts


def main(argv: list[str]) -> int:
    if argv[0] == "send":
        send(argv[1], int(argv[2]))
        return 0
    print(json.dumps(receive(argv[1], float(argv[2]) if len(argv) > 2 else 120.0)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
