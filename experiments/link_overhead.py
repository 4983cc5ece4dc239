"""What the fabric links carried besides payload: data headers and everything else (SACKs,
probes, their answers, LLDP), estimated from the switches' packet and byte counters.

Switches count packets and bytes per port, not per kind, so the split is solved from the two
totals with two frame sizes: every data frame is taken as a full MRC data packet (Ethernet,
IPv4, UDP, BTH with RETH and TSETH, the payload, ICRC) and every other frame as a SACK, the
commonest of them. A message's last, shorter packet counts as part of a data frame, and
probes and LLDP frames, a little bigger than a SACK, as slightly more than one; for the
ring collectives' 64 KiB segments the error is below 1 %. Only MRC's frames are modelled:
for RoCE runs the figures are not computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from agent.core import codec
from experiments.bottleneck import LinkUtilisation
from wire.constants import Opcode

#: Ethernet, IPv4 and UDP headers in front of every MRC datagram.
FRAME_OVERHEAD: Final = 14 + 20 + 8
ICRC_BYTES: Final = 4


def data_frame_bytes(payload: int) -> int:
    """A full MRC data packet's frame: headers with RETH and TSETH, payload, ICRC."""
    header = codec.data_header_struct(Opcode.WRITE_MIDDLE, True).size
    return FRAME_OVERHEAD + header + payload + ICRC_BYTES


def sack_frame_bytes() -> int:
    return FRAME_OVERHEAD + codec._SACK.size + ICRC_BYTES


@dataclass(frozen=True)
class LinkOverhead:
    """The fabric's link bytes over a run, split into payload, data packets' headers and the
    rest, and how many other frames crossed a link per data frame."""

    packets: int
    byte_count: int
    data_frames: float
    other_frames: float
    payload_share: float
    header_share: float
    other_share: float
    other_frames_per_data_frame: float | None


def link_overhead(links: Iterable[LinkUtilisation | None], payload: int) -> LinkOverhead | None:
    """The split over every link direction counted in bytes; None where none was, or where
    the counts fit no mix of the two frame sizes."""
    counted = [link for link in links if link is not None and link.byte_count is not None]
    if not counted:
        return None
    packets = sum(link.packets for link in counted)
    byte_count = sum(link.byte_count or 0 for link in counted)
    if packets == 0:
        return None
    data_size, other_size = data_frame_bytes(payload), sack_frame_bytes()
    # packets = d + o and bytes = data_size d + other_size o, for d data and o other frames.
    data = (byte_count - other_size * packets) / (data_size - other_size)
    data = min(max(data, 0.0), float(packets))
    other = packets - data
    payload_bytes = data * payload
    header_bytes = data * (data_size - payload)
    return LinkOverhead(
        packets=packets,
        byte_count=byte_count,
        data_frames=data,
        other_frames=other,
        payload_share=payload_bytes / byte_count,
        header_share=header_bytes / byte_count,
        other_share=max(byte_count - payload_bytes - header_bytes, 0.0) / byte_count,
        other_frames_per_data_frame=other / data if data else None,
    )


def overhead_of(links: Mapping[str, LinkUtilisation | None], payload: int) -> LinkOverhead | None:
    """:func:`link_overhead` of a run's ``link_utilisation``."""
    return link_overhead(links.values(), payload)
