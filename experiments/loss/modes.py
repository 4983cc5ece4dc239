"""The loss experiment's knobs and modes: every transport at every loss rate."""

from __future__ import annotations

from dataclasses import dataclass

from agent.roce.config import MAX_TIMEOUT_EXPONENT
from agent.roce.profiles import PERFTEST
from experiments.transports import (
    ALL_ROCE_PROFILES,
    ROCE,
    Contender,
    parse_routing,
    parse_transports,
)

#: The highest rate a run may ask for, in percent: above it no transport moves data.
MAX_RATE_PERCENT = 50.0


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 10.0
    #: Loss rates on every fabric link, in percent, comma-separated.
    rates_percent: str = "0,0.1,1,5"
    transports: str = "mrc,single,roce"
    #: Verbs timeouts perftest's RoCE is also run with (``roce:perftest:tN``), comma-separated
    #: ("": none): how much of its collapse under loss is its 67 ms timer.
    perftest_timeouts: str = "10,12"
    source: str = "h1"
    destination: str = "h3"
    mrc_evs: int = 256
    message_size: int = 65536
    bin_s: float = 0.5
    lldp_interval_ms: int = 50
    #: The RoCE profiles a bare ``roce`` stands for (``make experiment ROCE=``).
    roce_profiles: str = ALL_ROCE_PROFILES
    #: The controller's routing policy ("": its default); loss never cuts a link.
    routing: str = ""

    def check(self) -> None:
        """ValueError for settings that cannot work."""
        if self.duration_s <= 0 or self.bin_s <= 0 or self.mrc_evs < 1 or self.message_size < 1:
            raise ValueError("duration_s, bin_s, mrc_evs and message_size must be positive")
        if self.routing:
            parse_routing(self.routing)
        modes_of(self)

    def timeouts(self) -> tuple[int, ...]:
        """``perftest_timeouts`` as verbs timeouts, each once."""
        return parse_timeouts(self.perftest_timeouts)

    def rates(self) -> tuple[float, ...]:
        """The rates in percent, each once, in the order given."""
        return parse_rates(self.rates_percent)


def parse_rates(text: str) -> tuple[float, ...]:
    """``0,0.1,1`` -> (0.0, 0.1, 1.0); ValueError for a rate outside 0..MAX_RATE_PERCENT."""
    rates = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"loss rate {part!r} is not a number (percent)") from None
        if not 0 <= value <= MAX_RATE_PERCENT:
            raise ValueError(f"loss rate {part} % is outside 0..{MAX_RATE_PERCENT:g} %")
        rates.append(value)
    if not rates:
        raise ValueError("no loss rate given (rates_percent, e.g. 0,1,5)")
    if len(set(rates)) != len(rates):
        raise ValueError(f"a loss rate is listed twice: {text}")
    return tuple(rates)


def parse_timeouts(text: str) -> tuple[int, ...]:
    """``10,12`` -> (10, 12); ValueError for one that is no verbs timeout or is repeated."""
    timeouts = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"perftest timeout {part!r} is no verbs timeout (0..31)") from None
        if not 0 <= value <= MAX_TIMEOUT_EXPONENT:
            raise ValueError(f"perftest timeout {value} is no verbs timeout (0..31)")
        timeouts.append(value)
    if len(set(timeouts)) != len(timeouts):
        raise ValueError(f"a perftest timeout is listed twice: {text}")
    return tuple(timeouts)


def rate_text(percent: float) -> str:
    """A loss rate as modes, keys and figures write it: ``0.1``, ``5``."""
    return f"{percent:g}"


@dataclass(frozen=True)
class LossMode:
    """One mode: a transport (``experiments.transports``) at a loss rate on every fabric
    link, in percent. Its label is ``TRANSPORT@RATE%`` (``mrc@1%``)."""

    transport: str
    loss_rate_percent: float

    def __str__(self) -> str:
        return f"{self.transport}@{rate_text(self.loss_rate_percent)}%"

    @classmethod
    def parse(cls, label: str) -> LossMode:
        """The mode a label names (a mode key of summary.json); ValueError if it names none."""
        transport, at, rate = label.partition("@")
        if not at or not rate.endswith("%"):
            raise ValueError(f"{label!r} is no loss mode (TRANSPORT@RATE%)")
        return cls(transport, float(rate.removesuffix("%")))


def contenders_of(params: Params) -> tuple[str, ...]:
    """Every transport asked for, then perftest at each swept timeout (when perftest's
    profile is among them at all: the sweep is its own)."""
    transports = parse_transports(params.transports, params.roce_profiles)
    perftest = str(Contender(ROCE, PERFTEST.name))
    if params.timeouts() and perftest not in transports:
        raise ValueError(
            f"perftest_timeouts sweeps {perftest}, which is not among the transports: add it "
            "or set perftest_timeouts="
        )
    swept = tuple(str(Contender(ROCE, PERFTEST.name, timeout=t)) for t in params.timeouts())
    twice = sorted(set(swept) & set(transports))
    if twice:
        raise ValueError(f"{', '.join(twice)} is both a transport and a swept timeout")
    return transports + swept


def modes_of(params: Params) -> tuple[LossMode, ...]:
    """Every contender at every rate, rate by rate: the contenders compared at one rate run
    side by side."""
    contenders = contenders_of(params)
    return tuple(LossMode(t, rate) for rate in params.rates() for t in contenders)
