"""Linux socket constants the runtime needs and Python's ``socket`` module does not export.

Values are from the Linux UAPI headers (``linux/in.h``, ``linux/in6.h``); they are stable ABI.
Python 3.11 lacks ``IP_PKTINFO``, ``IP_RECVTOS``, ``IPV6_FLOWINFO``, ``IPV6_HDRINCL`` and
``UDP_NO_CHECK6_RX``, so they are named once here instead of as magic numbers at each use.
"""

from __future__ import annotations

import socket

#: IPv4: receive the header's destination address (``struct in_pktinfo``) with each datagram.
IP_PKTINFO = 8
#: IPv4: receive the TOS byte (DSCP and ECN) with each datagram.
IP_RECVTOS = 13
#: IPv4 control-message type carrying the received TOS byte.
IP_TOS_CMSG = socket.IP_TOS
#: IPv6: receive the flow information word (traffic class and flow label) with each datagram.
IPV6_FLOWINFO = 11
#: IPv6 raw sockets: the caller writes the whole IPv6 header (Linux >= 4.5).
IPV6_HDRINCL = 36
#: IPv6: receive the traffic class (DSCP and ECN) with each datagram.
IPV6_RECVTCLASS = socket.IPV6_RECVTCLASS
#: IPv6 control-message type carrying the received traffic class.
IPV6_TCLASS = socket.IPV6_TCLASS
#: IPv6: receive the destination address (``struct in6_pktinfo``) with each datagram.
IPV6_RECVPKTINFO = socket.IPV6_RECVPKTINFO
#: IPv6 control-message type carrying ``struct in6_pktinfo``.
IPV6_PKTINFO = socket.IPV6_PKTINFO
#: IPv6 UDP: accept datagrams whose UDP checksum is zero (``linux/udp.h``). A switch trims a
#: packet to its headers and zeroes the checksum it can no longer compute (the ICRC, not the
#: checksum, protects MRC); Linux drops such IPv6 datagrams unless the socket allows them.
UDP_NO_CHECK6_RX = 102
#: Set a socket buffer size above ``net.core.[rw]mem_max`` (needs CAP_NET_ADMIN).
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33

#: Byte offset of the header destination address in ``struct in_pktinfo``
#: (``int ipi_ifindex; struct in_addr ipi_spec_dst; struct in_addr ipi_addr``).
IN_PKTINFO_ADDR_OFFSET = 8
#: ``struct in6_pktinfo`` is ``struct in6_addr ipi6_addr; int ipi6_ifindex``.
IN6_PKTINFO_ADDR_OFFSET = 0
