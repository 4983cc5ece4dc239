"""Where an entropy value (EV) travels in a packet's headers: the one statement of the mapping.

An EV is 32 bits, the value the P4 program hashes to pick a path (``p4src/include/control/
next.p4``) and the agent sprays its packets over. It is not in the MRC headers at all:

* bits 31-16 are the UDP source port;
* bits 15-0 are the low 16 bits of the IPv6 flow label. IPv4 has no flow label, so an EV sent
  over IPv4 has bits 15-0 clear.

The agent's per-packet path (sending, receiving, probing), the simulator, the frame builders,
the live view's path tracer and the tools all convert through these functions. They are plain
functions of ints so that the agent's mypyc-compiled modules call them as they call any Python
function.
"""

from __future__ import annotations

from typing import Final

#: The largest EV: 32 bits.
MAX_EV: Final = 0xFFFF_FFFF
_HALF: Final = 0xFFFF


def ev_source_port(ev: int) -> int:
    """The UDP source port that carries EV bits 31-16."""
    return (ev >> 16) & _HALF


def ev_flow_label(ev: int) -> int:
    """The IPv6 flow label (its low 16 bits) that carries EV bits 15-0."""
    return ev & _HALF


def ev_from_headers(source_port: int, flow_label: int = 0) -> int:
    """The EV a packet travels on, from its UDP source port and (IPv6) flow label; the flow
    label's bits above the 16th carry no entropy and are ignored."""
    return ((source_port & _HALF) << 16) | (flow_label & _HALF)
