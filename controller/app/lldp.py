"""LLDP link probes: the frames the controller sends out of every switch port and reads back.

A probe is an IEEE 802.1AB frame (to the nearest-bridge group address, EtherType 0x88CC) whose
mandatory TLVs name the sending switch (chassis ID, subtype 7 "locally assigned": the switch
name) and port (port ID, subtype 7: the port number in decimal), followed by one
organisationally specific TLV that carries what liveness needs: the sending controller's nonce
(probes of another controller instance are told apart and ignored) and the probe round's
sequence number (which probe of a port arrived, so misses can be counted).

The OUI of that TLV, 02:4D:52 ("MR" behind a locally administered first octet), is the
testbed's own choice: it is not an IEEE assignment and only has to be recognised by this code.

Decoding never raises anything but :class:`ProbeDecodeError`: a malformed frame is counted and
dropped by the caller, and a well-formed LLDP frame from another sender (a host running lldpd)
raises its subclass :class:`ForeignLldp`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

LLDP_ETHERTYPE = 0x88CC
#: Nearest-bridge group address: never forwarded by a bridge, only by the switch's CPU path.
LLDP_DST_MAC = bytes.fromhex("0180c200000e")
MRC_OUI = bytes.fromhex("024d52")
MRC_PROBE_SUBTYPE = 1
MIN_FRAME = 60  # Ethernet minimum without the FCS

_TLV_END = 0
_TLV_CHASSIS_ID = 1
_TLV_PORT_ID = 2
_TLV_TTL = 3
_TLV_ORG = 127
_SUBTYPE_LOCAL = 7
_ETH_HEADER = struct.Struct("!6s6sH")
_PROBE_DATA = struct.Struct("!IQ")  # nonce, sequence
_MAX_NAME = 255
_MAX_PORT = 0xFFFF


class ProbeDecodeError(ValueError):
    """The frame is not a valid controller probe."""


class ForeignLldp(ProbeDecodeError):
    """A valid LLDP frame that no MRC controller sent."""


@dataclass(frozen=True)
class Probe:
    """What a probe says: who sent it (switch and port), which controller, which round."""

    switch: str
    port: int
    nonce: int
    sequence: int

    def __post_init__(self) -> None:
        name = self.switch.encode()
        if not 1 <= len(name) <= _MAX_NAME - 1:
            raise ValueError(f"switch name must be 1..{_MAX_NAME - 1} bytes, got {self.switch!r}")
        if not 0 <= self.port <= _MAX_PORT:
            raise ValueError(f"port {self.port} outside 0..{_MAX_PORT}")
        if not 0 <= self.nonce < 1 << 32:
            raise ValueError(f"nonce {self.nonce} is not a 32-bit value")
        if not 0 <= self.sequence < 1 << 64:
            raise ValueError(f"sequence {self.sequence} is not a 64-bit value")


def encode_probe(probe: Probe, src_mac: str, ttl_s: int = 1) -> bytes:
    """The Ethernet frame of ``probe``, sent from a port whose MAC is ``src_mac``."""
    body = b"".join(
        (
            _tlv(_TLV_CHASSIS_ID, bytes([_SUBTYPE_LOCAL]) + probe.switch.encode()),
            _tlv(_TLV_PORT_ID, bytes([_SUBTYPE_LOCAL]) + str(probe.port).encode()),
            _tlv(_TLV_TTL, struct.pack("!H", max(0, min(ttl_s, 0xFFFF)))),
            _tlv(
                _TLV_ORG,
                MRC_OUI
                + bytes([MRC_PROBE_SUBTYPE])
                + _PROBE_DATA.pack(probe.nonce, probe.sequence),
            ),
            _tlv(_TLV_END, b""),
        )
    )
    frame = _ETH_HEADER.pack(LLDP_DST_MAC, _mac_bytes(src_mac), LLDP_ETHERTYPE) + body
    return frame.ljust(MIN_FRAME, b"\x00")


def decode_probe(frame: bytes) -> Probe:
    """The probe a frame carries; ProbeDecodeError (or ForeignLldp) when it carries none."""
    if len(frame) < _ETH_HEADER.size:
        raise ProbeDecodeError(f"frame of {len(frame)} bytes is shorter than an Ethernet header")
    _, _, ethertype = _ETH_HEADER.unpack_from(frame)
    if ethertype != LLDP_ETHERTYPE:
        raise ProbeDecodeError(f"EtherType {ethertype:#06x} is not LLDP")
    tlvs = _parse_tlvs(frame, _ETH_HEADER.size)
    if len(tlvs) < 3 or [kind for kind, _ in tlvs[:3]] != [_TLV_CHASSIS_ID, _TLV_PORT_ID, _TLV_TTL]:
        raise ProbeDecodeError("LLDP frame does not start with chassis ID, port ID and TTL")
    chassis, port_id, ttl = (value for _, value in tlvs[:3])
    if len(ttl) != 2:
        raise ProbeDecodeError(f"TTL TLV of {len(ttl)} bytes (expected 2)")
    data = _probe_data(tlvs[3:])
    if chassis[:1] != bytes([_SUBTYPE_LOCAL]) or port_id[:1] != bytes([_SUBTYPE_LOCAL]):
        raise ProbeDecodeError("probe chassis or port ID is not locally assigned")
    switch = _text(chassis[1:], "chassis ID")
    port_text = _text(port_id[1:], "port ID")
    if not port_text.isdigit() or int(port_text) > _MAX_PORT:
        raise ProbeDecodeError(f"probe port ID {port_text!r} is not a port number")
    nonce, sequence = _PROBE_DATA.unpack(data)
    return Probe(switch, int(port_text), nonce, sequence)


def _tlv(kind: int, value: bytes) -> bytes:
    return struct.pack("!H", (kind << 9) | len(value)) + value


def _parse_tlvs(frame: bytes, offset: int) -> list[tuple[int, bytes]]:
    tlvs: list[tuple[int, bytes]] = []
    while True:
        if offset + 2 > len(frame):
            raise ProbeDecodeError("LLDP frame ends without an End TLV")
        (header,) = struct.unpack_from("!H", frame, offset)
        kind, length = header >> 9, header & 0x1FF
        offset += 2
        if kind == _TLV_END:
            if length != 0:
                raise ProbeDecodeError(f"End TLV with length {length}")
            return tlvs
        if offset + length > len(frame):
            raise ProbeDecodeError(f"TLV type {kind} of {length} bytes runs past the frame")
        tlvs.append((kind, frame[offset : offset + length]))
        offset += length


def _probe_data(tlvs: list[tuple[int, bytes]]) -> bytes:
    for kind, value in tlvs:
        if kind == _TLV_ORG and value[:3] == MRC_OUI and value[3:4] == bytes([MRC_PROBE_SUBTYPE]):
            data = value[4:]
            if len(data) != _PROBE_DATA.size:
                raise ProbeDecodeError(f"MRC probe TLV of {len(data)} data bytes")
            return data
    raise ForeignLldp("LLDP frame without the MRC probe TLV")


def _text(raw: bytes, what: str) -> str:
    if not raw:
        raise ProbeDecodeError(f"empty {what}")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ProbeDecodeError(f"{what} is not UTF-8") from None


def _mac_bytes(mac: str) -> bytes:
    octets = mac.split(":")
    if len(octets) != 6:
        raise ValueError(f"malformed MAC address {mac!r}")
    return bytes(int(octet, 16) for octet in octets)
