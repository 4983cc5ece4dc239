"""RoCE as deployments run it: named sets of settings, each with where it comes from.

A RoCE figure means little without the settings behind it: a fixed 67 ms timer against NCCL's
4.3 s or a NIC's adaptive one changes what loss and failure cost by orders of magnitude. So a
RoCE transfer names a profile (``--roce-profile``), and each profile says what it models and
its source; ``--roce-timeout`` and ``--roce-retry-cnt`` still override its verbs values, and
``--qps`` its QP count. ``docs/protocol.md`` ("RoCE profiles") says what each models and what
is assumed where vendors publish nothing.

* ``perftest`` (the default, and the floor every other is measured against): what perftest's
  ``ib_write_bw`` sets, ``timeout`` 14 (67 ms), ``retry_cnt`` 7, one QP, go-back-N.
* ``nccl``: what NCCL sets, ``NCCL_IB_TIMEOUT`` 20 (4.3 s) and ``NCCL_IB_RETRY_CNT`` 7, go-back-N,
  and as many QPs to a peer as NCCL opens by default (``NCCL_IB_QPS_PER_CONNECTION`` = 1 QP for
  each of the ``NCCL_NCHANNELS_PER_NET_PEER`` = 2 channels to a network peer, each channel its
  own connection).
* ``adaptive``: NCCL's settings on a modern NIC: selective repeat and an adaptive
  retransmission timer (``agent.roce.rto``), the verbs timeout its backoff's ceiling.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from agent.roce.config import MAX_RETRY_CNT, MAX_TIMEOUT_EXPONENT, RoceConfig


@dataclass(frozen=True, slots=True)
class RoceProfile:
    """A named set of RoCE settings and where they come from."""

    name: str
    #: One line for choice lists.
    summary: str
    #: Where the values come from, and what is assumed.
    source: str
    #: Verbs ``timeout`` (4.096 us x 2**timeout) and ``retry_cnt``.
    timeout: int
    retry_cnt: int
    selective_repeat: bool
    adaptive_retransmission: bool
    #: QPs a transfer is striped over when ``--qps`` does not say.
    qps: int

    def __post_init__(self) -> None:
        if not 0 <= self.timeout <= MAX_TIMEOUT_EXPONENT:
            raise ValueError(f"profile {self.name}: timeout {self.timeout} is not a verbs one")
        if not 0 <= self.retry_cnt <= MAX_RETRY_CNT:
            raise ValueError(f"profile {self.name}: retry_cnt {self.retry_cnt} out of range")
        if self.qps < 1:
            raise ValueError(f"profile {self.name}: a transfer needs at least one QP")

    def config(self, base: RoceConfig | None = None) -> RoceConfig:
        """``base`` (the defaults if None) with this profile's settings."""
        return dataclasses.replace(
            base if base is not None else RoceConfig(),
            timeout=self.timeout,
            retry_cnt=self.retry_cnt,
            selective_repeat=self.selective_repeat,
            adaptive_retransmission=self.adaptive_retransmission,
        )


PERFTEST: Final = RoceProfile(
    name="perftest",
    summary="perftest's ib_write_bw: timeout 14 (67 ms), retry 7, one QP, go-back-N",
    source="perftest's defaults (ib_write_bw: -u 14, retry_cnt 7, -q 1); the IBTA's RC "
    "go-back-N and fixed local ACK timeout",
    timeout=14,
    retry_cnt=MAX_RETRY_CNT,
    selective_repeat=False,
    adaptive_retransmission=False,
    qps=1,
)
NCCL: Final = RoceProfile(
    name="nccl",
    summary="NCCL's: timeout 20 (4.3 s), retry 7, 2 QPs to a peer, go-back-N",
    source="NCCL's defaults: NCCL_IB_TIMEOUT 20, NCCL_IB_RETRY_CNT 7; NCCL_IB_QPS_PER_CONNECTION "
    "1 for each of NCCL_NCHANNELS_PER_NET_PEER 2 channels, each its own connection; messages "
    "round-robin over the QPs (NCCL_IB_SPLIT_DATA_ON_QPS 0)",
    timeout=20,
    retry_cnt=MAX_RETRY_CNT,
    selective_repeat=False,
    adaptive_retransmission=False,
    qps=2,
)
ADAPTIVE: Final = RoceProfile(
    name="adaptive",
    summary="NCCL's settings on a modern NIC: selective repeat, adaptive timer (1 ms floor)",
    source="NCCL's settings (the nccl profile) on a NIC with adaptive retransmission and "
    "selective repeat, as NVIDIA's recent NICs advertise; their behaviour is not published, so "
    "the timer is RFC 6298's with a 1 ms floor and backoff up to the verbs timeout, and "
    "selective repeat is the testbed's (selective NAKs, out-of-order placement)",
    timeout=20,
    retry_cnt=MAX_RETRY_CNT,
    selective_repeat=True,
    adaptive_retransmission=True,
    qps=2,
)

#: Every profile by name, the default first.
PROFILES: Final[dict[str, RoceProfile]] = {p.name: p for p in (PERFTEST, NCCL, ADAPTIVE)}
#: The profile of a RoCE transfer that names none.
DEFAULT_PROFILE: Final = PERFTEST.name


def profile_names() -> tuple[str, ...]:
    """``--roce-profile`` choices, the default first."""
    return tuple(PROFILES)


def profile_named(name: str) -> RoceProfile:
    """The profile called ``name``; ``ValueError`` naming the choices otherwise."""
    profile = PROFILES.get(name)
    if profile is None:
        raise ValueError(f"unknown RoCE profile {name!r}: choose {', '.join(PROFILES)}")
    return profile
