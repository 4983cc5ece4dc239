"""What a QP's verbs timing and size attributes mean to the agent's core.

``path_mtu`` (verbs' ``enum ibv_mtu``, set on the way to RTR) is the RDMA payload per data
packet, bounded by the agent's own payload size (``mrc-agent serve --payload``, chosen for
what its links carry): a QP asking for more gets what the link allows. ``timeout`` and
``retry`` (OCP's ``MRC_QP_TIMEOUT`` and ``MRC_QP_RETRY_CNT``, set on the way to RTS) bound how
long a QP may go unanswered with work outstanding before its retries are exhausted: then the
QP enters ERR, its oldest WRITE completes with RETRY_EXC_ERR and the context gets QP_FATAL.
The core retransmits on its own measured timers (RACK, RTO with backoff), which serve MRC's
spraying better than a fixed timeout; what these attributes set is when it gives up. ``mpr``
and ``mpr_dest`` count 128 PSNs each, up to the device's ``max_mpr``: the core's PSN window,
which governs (they are checked and kept, and change nothing).
"""

from __future__ import annotations

from typing import Final

#: Verbs' ``enum ibv_mtu``: IBV_MTU_256 (1) to IBV_MTU_4096 (5).
MTU_256: Final = 1
MTU_4096: Final = 5
#: OCP's unit of the local ACK ``timeout`` exponent: 1.024 us x 2**timeout.
ACK_TIMEOUT_UNIT: Final = 1.024e-6
#: ``retry.exp_cnt`` that means "retry for ever".
RETRY_EXP_INFINITE: Final = 25
#: ``retry.linear_cnt`` when only ``timeout`` is given: verbs' usual ``retry_cnt`` of 7.
DEFAULT_RETRY_LINEAR: Final = 7
#: OCP's unit of ``mpr``, ``mpr_dest`` and ``max_mpr``: 128 PSNs.
MPR_UNIT_PSNS: Final = 128


def mtu_bytes(path_mtu: int) -> int:
    """The payload bytes of a verbs path MTU enum (1 -> 256 ... 5 -> 4096)."""
    return 128 << path_mtu


def active_mtu(payload_size: int) -> int:
    """The largest verbs path MTU enum whose bytes fit ``payload_size`` (the agent's payload
    per packet, set for its links), at least IBV_MTU_256: a port's ``active_mtu``."""
    path_mtu = MTU_256
    while path_mtu < MTU_4096 and mtu_bytes(path_mtu + 1) <= payload_size:
        path_mtu += 1
    return path_mtu


def max_mpr(psn_window: int) -> int:
    """The largest ``mpr`` the device advertises: the core's PSN window, in OCP's units."""
    return psn_window // MPR_UNIT_PSNS


def retry_budget(timeout: int, linear: int, exponential: int) -> float | None:
    """Seconds a QP may go unanswered before its retries are exhausted, or None for never.

    The first transmission waits one local ACK timeout (``ACK_TIMEOUT_UNIT`` x 2**timeout),
    each of the ``linear`` retries one more, and the ``exponential`` retries after them twice
    the previous wait each (2, 4, 8, ... timeouts). ``timeout`` 0 (as verbs) and
    ``exponential`` 25 (as OCP) never exhaust."""
    if timeout == 0 or exponential >= RETRY_EXP_INFINITE:
        return None
    unit = ACK_TIMEOUT_UNIT * (1 << timeout)
    return unit * (1 + linear + (1 << (exponential + 1)) - 2)
