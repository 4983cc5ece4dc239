"""Which transport a transfer uses: MRC, MRC on a single path, or the RoCE baseline.

``mrc-agent send``, ``mrc-perf`` and the control socket take ``--transport mrc|single|roce``:

* ``mrc``: MRC as configured (256 EVs by default);
* ``single``: MRC on one EV, i.e. ``--evs 1``: what spraying alone adds, everything else equal;
* ``roce``: a standard RoCEv2 RC QP (``agent.roce``): one path, go-back-N, local ACK timeout
  and ``retry_cnt``, DCQCN. Its verbs settings are ``--roce-timeout`` (the exponent, 14 ->
  67 ms) and ``--roce-retry-cnt`` (7).

Only MRC or RoCE travels in the side channel's hello (``on_wire``): a single-path MRC
connection is an MRC connection to the receiver. Conflicting options are refused here with a
``UsageError`` naming them, before anything is sent.
"""

from __future__ import annotations

import dataclasses
from enum import Enum

from agent.core import MrcConfig
from agent.io.errors import UsageError
from agent.roce import RoceConfig
from agent.roce.config import MAX_RETRY_CNT, MAX_TIMEOUT_EXPONENT
from wire.dscp import DscpMap


class Transport(Enum):
    """A transfer's transport, as ``--transport`` names it."""

    MRC = "mrc"
    SINGLE = "single"
    ROCE = "roce"

    @property
    def on_wire(self) -> str:
        """What the side channel's hello says: ``roce``, or ``mrc`` for both MRC forms."""
        return "roce" if self is Transport.ROCE else "mrc"


#: ``--transport`` choices.
TRANSPORTS = tuple(transport.value for transport in Transport)
#: What a hello's ``transport`` field may say.
WIRE_TRANSPORTS = ("mrc", "roce")


def parse_transport(text: str | None) -> Transport:
    """``--transport`` (None: ``mrc``); ``UsageError`` for an unknown name."""
    if text is None:
        return Transport.MRC
    try:
        return Transport(text)
    except ValueError:
        raise UsageError(f"unknown transport {text!r}: choose {', '.join(TRANSPORTS)}") from None


def check_transport_options(
    transport: Transport,
    *,
    evs: int | None = None,
    cc: str | None = None,
    roce_timeout: int | None = None,
    roce_retry_cnt: int | None = None,
) -> None:
    """Refuse options that do not go with ``transport`` (``UsageError`` naming them)."""
    if transport is Transport.SINGLE and evs not in (None, 1):
        raise UsageError(f"--transport single is MRC on one EV; it cannot take --evs {evs}")
    if transport is Transport.ROCE:
        mrc_only = [name for name, value in (("--evs", evs), ("--cc", cc)) if value is not None]
        if mrc_only:
            raise UsageError(
                f"{', '.join(mrc_only)} configure MRC; a RoCE QP uses one path and DCQCN"
            )
    else:
        roce_only = [
            name
            for name, value in (
                ("--roce-timeout", roce_timeout),
                ("--roce-retry-cnt", roce_retry_cnt),
            )
            if value is not None
        ]
        if roce_only:
            raise UsageError(f"{', '.join(roce_only)} configure a RoCE QP: add --transport roce")


def mrc_config_for(transport: Transport, config: MrcConfig) -> MrcConfig:
    """``config`` as ``transport`` runs MRC: ``single`` on one EV, else unchanged."""
    if transport is Transport.SINGLE and config.ev_set_size != 1:
        return dataclasses.replace(config, ev_set_size=1)
    return config


def roce_config_for(
    dscp: DscpMap,
    *,
    timeout: int | None = None,
    retry_cnt: int | None = None,
    pmtu: int | None = None,
) -> RoceConfig:
    """A RoCE QP's settings: the verbs options given, the agent's DSCP classes, defaults for
    the rest; ``UsageError`` naming the option for a value verbs would refuse."""
    if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT_EXPONENT:
        raise UsageError(
            f"--roce-timeout is the verbs exponent 0-{MAX_TIMEOUT_EXPONENT} (4.096 us x 2^N; "
            f"0: no timeout), got {timeout}"
        )
    if retry_cnt is not None and not 0 <= retry_cnt <= MAX_RETRY_CNT:
        raise UsageError(f"--roce-retry-cnt must be in 0-{MAX_RETRY_CNT}, got {retry_cnt}")
    changes: dict[str, object] = {"dscp": dscp}
    if timeout is not None:
        changes["timeout"] = timeout
    if retry_cnt is not None:
        changes["retry_cnt"] = retry_cnt
    if pmtu is not None:
        changes["pmtu"] = pmtu
    try:
        return dataclasses.replace(RoceConfig(), **changes)  # type: ignore[arg-type]
    except ValueError as exc:
        raise UsageError(f"invalid --payload for a RoCE QP: {exc}") from None
