"""Which transport a transfer uses: MRC, MRC on a single path, or the RoCE baseline.

``mrc-agent send``, ``mrc-perf`` and the control socket take ``--transport mrc|single|roce``:

* ``mrc``: MRC as configured (256 EVs by default);
* ``single``: MRC on one EV, i.e. ``--evs 1``: what spraying alone adds, everything else equal;
* ``roce``: standard RoCEv2 RC QPs (``agent.roce``): each on one path, go-back-N, local ACK
  timeout and ``retry_cnt``, DCQCN. ``--roce-profile`` names the settings a deployment runs
  (``agent.roce.profiles``: ``perftest``, the default, ``nccl``, ``adaptive``);
  ``--roce-timeout`` (the exponent, 14 -> 67 ms) and ``--roce-retry-cnt`` override its verbs
  values, and ``--qps`` its count of QPs the transfer is striped over (``agent.io.qp_striping``).
  ``--roce-line-rate`` (bits/s) is the NIC port's rate: the transfer's QPs share it evenly,
  each starting at its share and never exceeding it, and DCQCN's rate constants scale with it
  (``DcqcnParams.scaled_to``), so that a RoCE QP on a slowed link can be slowed to it.

Transports are a registry (``register_transport``): each is declared once, and every
``--transport`` choice list and check (the agent's CLI and control socket, collectives, the
testbed, experiments) reads ``transport_names()``. Only the engine, MRC or RoCE, travels in
the side channel's hello (``on_wire``): a single-path MRC connection is an MRC connection to
the receiver. Conflicting options are refused here with a
``UsageError`` naming them, before anything is sent.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from agent.core import MrcConfig
from agent.io.errors import UsageError
from agent.roce import RoceConfig
from agent.roce.config import (
    MAX_LINE_RATE,
    MAX_RETRY_CNT,
    MAX_TIMEOUT_EXPONENT,
    MIN_LINE_RATE,
    DcqcnParams,
)
from agent.roce.profiles import DEFAULT_PROFILE, RoceProfile, profile_named
from wire.dscp import DscpMap

#: Most QPs one RoCE transfer is striped over: the papers' comparison uses 16; beyond it room
#: to spare, and a bound on what one hello makes a receiver set up.
MAX_QPS = 64
#: ``--roce-line-rate`` bounds in bits/s (``agent.roce.config``'s, which are bytes/s).
MIN_ROCE_LINE_RATE = MIN_LINE_RATE * 8
MAX_ROCE_LINE_RATE = MAX_LINE_RATE * 8


class Engine(StrEnum):
    """The protocol a transport runs, and what the side channel's hello says."""

    MRC = "mrc"
    ROCE = "roce"


@dataclass(frozen=True, slots=True)
class RoceSetup:
    """How a RoCE transfer runs: each QP's settings, how many QPs carry it, and the profile
    (``agent.roce.profiles``) they came from, for reports."""

    config: RoceConfig
    qps: int = 1
    profile: str = DEFAULT_PROFILE

    def __post_init__(self) -> None:
        if not 1 <= self.qps <= MAX_QPS:
            raise ValueError(f"a RoCE transfer runs over 1-{MAX_QPS} QPs, got {self.qps}")


@dataclass(frozen=True)
class Transport:
    """A transport ``--transport`` can name: an engine and how it is set up."""

    name: str
    engine: Engine
    #: One line for choice lists and docs.
    summary: str
    #: MRC transports: the EV count it always runs with (``single``: 1); None leaves
    #: ``--evs`` free.
    evs: int | None = None

    def __post_init__(self) -> None:
        if self.evs is not None and (self.engine is not Engine.MRC or self.evs < 1):
            raise ValueError(f"transport {self.name}: a fixed EV count needs MRC and >= 1")

    @property
    def on_wire(self) -> str:
        """What the side channel's hello says: the engine (``mrc`` for every MRC form)."""
        return self.engine.value

    @property
    def is_roce(self) -> bool:
        return self.engine is Engine.ROCE


_TRANSPORTS: dict[str, Transport] = {}


def register_transport(transport: Transport) -> Transport:
    """Add a transport to every ``--transport`` choice and check; a taken name is refused."""
    if transport.name in _TRANSPORTS:
        raise ValueError(f"transport {transport.name!r} is registered already")
    _TRANSPORTS[transport.name] = transport
    return transport


def unregister_transport(name: str) -> None:
    """Remove a transport (a test's dummy one, say); the built-in ones stay."""
    if name not in (MRC.name, SINGLE.name, ROCE.name):
        _TRANSPORTS.pop(name, None)


def transport_names() -> tuple[str, ...]:
    """``--transport`` choices, the default (``mrc``) first."""
    return tuple(_TRANSPORTS)


def transport_named(name: str) -> Transport:
    """The transport called ``name``; ``ValueError`` naming the choices otherwise."""
    transport = _TRANSPORTS.get(name)
    if transport is None:
        raise ValueError(f"unknown transport {name!r}: choose {', '.join(_TRANSPORTS)}")
    return transport


MRC = register_transport(Transport("mrc", Engine.MRC, "MRC as configured (256 EVs by default)"))
SINGLE = register_transport(
    Transport("single", Engine.MRC, "MRC on one EV: what spraying alone adds", evs=1)
)
ROCE = register_transport(
    Transport("roce", Engine.ROCE, "a RoCEv2 RC QP: one path, go-back-N, DCQCN")
)
#: What a hello's ``transport`` field may say.
WIRE_TRANSPORTS = tuple(engine.value for engine in Engine)


def parse_transport(text: str | None) -> Transport:
    """``--transport`` (None: ``mrc``); ``UsageError`` for an unknown name."""
    if text is None:
        return MRC
    try:
        return transport_named(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_transport_options(
    transport: Transport,
    *,
    evs: int | None = None,
    cc: str | None = None,
    roce_timeout: int | None = None,
    roce_retry_cnt: int | None = None,
    roce_profile: str | None = None,
    qps: int | None = None,
    roce_line_rate: float | None = None,
) -> None:
    """Refuse options that do not go with ``transport`` (``UsageError`` naming them)."""
    if transport.evs is not None and evs not in (None, transport.evs):
        raise UsageError(
            f"--transport {transport.name} is MRC on {transport.evs} EV"
            f"{'s' if transport.evs > 1 else ''}; it cannot take --evs {evs}"
        )
    if transport.is_roce:
        mrc_only = [name for name, value in (("--evs", evs), ("--cc", cc)) if value is not None]
        if mrc_only:
            raise UsageError(
                f"{', '.join(mrc_only)} configure MRC; a RoCE QP uses one path and DCQCN"
            )
    else:
        roce_only = [
            name
            for name, value in (
                ("--roce-profile", roce_profile),
                ("--roce-timeout", roce_timeout),
                ("--roce-retry-cnt", roce_retry_cnt),
                ("--qps", qps),
                ("--roce-line-rate", roce_line_rate),
            )
            if value is not None
        ]
        if roce_only:
            raise UsageError(f"{', '.join(roce_only)} configure RoCE QPs: add --transport roce")


def mrc_config_for(transport: Transport, config: MrcConfig) -> MrcConfig:
    """``config`` as ``transport`` runs MRC: on its fixed EV count (``single``: one), else
    unchanged."""
    if transport.evs is not None and config.ev_set_size != transport.evs:
        return dataclasses.replace(config, ev_set_size=transport.evs)
    return config


def roce_config_for(
    dscp: DscpMap,
    *,
    profile: str | None = None,
    timeout: int | None = None,
    retry_cnt: int | None = None,
    pmtu: int | None = None,
    line_rate: float | None = None,
    sharers: int = 1,
) -> RoceConfig:
    """A RoCE QP's settings: the profile's (``perftest`` if None), the verbs options given
    over them, DCQCN scaled to a port of ``line_rate`` (bits/s; None: its 10 Gbit/s
    defaults) that ``sharers`` QPs share evenly, the agent's DSCP classes, defaults for the
    rest; ``UsageError`` naming the option for an unknown profile or a value verbs would
    refuse."""
    base = _profile(profile).config()
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
    if line_rate is not None:
        changes["dcqcn"] = _dcqcn_at(line_rate, sharers)
    try:
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]
    except ValueError as exc:
        raise UsageError(f"invalid --payload for a RoCE QP: {exc}") from None


def roce_setup_for(
    dscp: DscpMap,
    *,
    profile: str | None = None,
    timeout: int | None = None,
    retry_cnt: int | None = None,
    pmtu: int | None = None,
    qps: int | None = None,
    line_rate: float | None = None,
) -> RoceSetup:
    """A RoCE transfer's setup: the QPs' settings (``roce_config_for``; with ``line_rate``
    bits/s, the port the transfer's QPs share, DCQCN scaled to it and each QP at most at its
    even share, so that striping over more QPs never sends faster than the port) and their
    count, ``qps`` or else the profile's; ``UsageError`` naming the option that is wrong."""
    chosen = _profile(profile)
    if qps is not None and not 1 <= qps <= MAX_QPS:
        raise UsageError(f"--qps must be in 1-{MAX_QPS}, got {qps}")
    count = chosen.qps if qps is None else qps
    config = roce_config_for(
        dscp,
        profile=chosen.name,
        timeout=timeout,
        retry_cnt=retry_cnt,
        pmtu=pmtu,
        line_rate=line_rate,
        sharers=count,
    )
    return RoceSetup(config, count, chosen.name)


def _profile(name: str | None) -> RoceProfile:
    try:
        return profile_named(DEFAULT_PROFILE if name is None else name)
    except ValueError as exc:
        raise UsageError(f"--roce-profile: {exc}") from None


def _dcqcn_at(line_rate: float, sharers: int) -> DcqcnParams:
    """DCQCN scaled to a port of ``line_rate`` bits/s shared by ``sharers`` QPs;
    ``UsageError`` outside the bounds."""
    try:
        return DcqcnParams.scaled_to(line_rate / 8, sharers)
    except ValueError as exc:
        raise UsageError(f"--roce-line-rate: {exc}") from None
