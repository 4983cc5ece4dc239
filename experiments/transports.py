"""What the experiments compare: transports as contenders, and the fabric's routing policy.

Transports (``mrc-agent --transport``): ``mrc`` (MRC spraying over its EVs), ``single`` (MRC
on one EV: what spraying alone adds) and ``roce`` (a RoCEv2 RC connection, go-back-N or
selective repeat, a local ACK timeout with ``retry_cnt`` retries). A RoCE transfer whose
retries run out fails the way a training job stops: that is a result to record (its error,
when it failed), not an error of the experiment. MRC is reliable by design; an MRC transfer
that fails or loses a byte is an error, on one EV as on many.

A RoCE figure means nothing without its settings, so an experiment compares RoCE as a
:class:`Contender` labelled with its profile (``agent.roce.profiles``): ``roce:nccl``, and
for a sweep or a QP count ``roce:perftest:t10`` (verbs timeout 10) or ``roce:nccl:16qp``. A
bare ``roce`` in a transports list stands for every profile of the experiment's
``roce_profiles`` (``make experiment ROCE=``), each its own mode.

Routing policies (``mrc-controller run --routing``): ``static`` (MRC's deployment: each switch
prunes only its own dead next hops), ``reactive`` (every cut rerouted fabric-wide at once) and
``converge:SECONDS`` (``reactive``, delayed as a routing protocol's reconvergence would be).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.io.transport import Engine, Transport, transport_named, transport_names
from agent.roce.config import MAX_TIMEOUT_EXPONENT
from agent.roce.profiles import DEFAULT_PROFILE, profile_named, profile_names
from controller.intent.policy import RoutingPolicy

MRC = "mrc"
SINGLE = "single"
ROCE = "roce"
STATIC = "static"
#: ``roce_profiles``' default: every profile, the default (the floor) first.
ALL_ROCE_PROFILES = ",".join(profile_names())
#: The most QPs a contender may stripe over (the papers compare with 16).
MAX_QPS = 256

_QPS = re.compile(r"(\d+)qp")
_TIMEOUT = re.compile(r"t(\d+)")


@dataclass(frozen=True)
class Contender:
    """A transport as an experiment runs it: a registry transport and, for RoCE, its profile
    and what overrides it (QPs, verbs timeout). Its label (``str``) is its mode's transport
    part: ``mrc``, ``roce:nccl``, ``roce:nccl:16qp``, ``roce:perftest:t10``."""

    transport: str
    roce_profile: str | None = None
    qps: int | None = None
    timeout: int | None = None

    def __post_init__(self) -> None:
        chosen = transport_named(self.transport)
        settings = (self.roce_profile, self.qps, self.timeout)
        if not chosen.is_roce and any(value is not None for value in settings):
            raise ValueError(f"{self.transport} takes no RoCE profile, QP count or timeout")
        if self.roce_profile is not None:
            profile_named(self.roce_profile)
        if self.qps is not None and not 1 <= self.qps <= MAX_QPS:
            raise ValueError(f"{self}: QPs must be in 1..{MAX_QPS}")
        if self.timeout is not None and not 0 <= self.timeout <= MAX_TIMEOUT_EXPONENT:
            raise ValueError(f"{self}: a verbs timeout is 0..{MAX_TIMEOUT_EXPONENT}")

    def __str__(self) -> str:
        parts = [self.transport]
        if self.roce_profile is not None:
            parts.append(self.roce_profile)
        if self.qps is not None:
            parts.append(f"{self.qps}qp")
        if self.timeout is not None:
            parts.append(f"t{self.timeout}")
        return ":".join(parts)

    @classmethod
    def parse(cls, label: str) -> Contender:
        """The contender a label names; ValueError naming what is wrong."""
        transport, *rest = label.strip().split(":")
        if transport not in transport_names():
            raise ValueError(
                f"unknown transport {transport} (choose from {', '.join(transport_names())})"
            )
        profile: str | None = None
        qps: int | None = None
        timeout: int | None = None
        for part in rest:
            if (match := _QPS.fullmatch(part)) is not None and qps is None:
                qps = int(match.group(1))
            elif (match := _TIMEOUT.fullmatch(part)) is not None and timeout is None:
                timeout = int(match.group(1))
            elif part in profile_names() and profile is None:
                profile = part
            else:
                raise ValueError(
                    f"{label!r}: {part!r} is no RoCE profile ({', '.join(profile_names())}), "
                    "QP count (16qp) or verbs timeout (t10), or is given twice"
                )
        return cls(transport, profile, qps, timeout)

    @property
    def registered(self) -> Transport:
        """The registry's transport."""
        return transport_named(self.transport)

    @property
    def is_roce(self) -> bool:
        return self.registered.is_roce

    @property
    def profile(self) -> str | None:
        """The RoCE profile it runs (the default when it names none); None for MRC."""
        if not self.is_roce:
            return None
        return self.roce_profile if self.roce_profile is not None else DEFAULT_PROFILE

    def transfer_options(self) -> dict[str, Any]:
        """Its ``TransferSpec`` keywords: the transport and, for RoCE, the profile and what
        overrides it."""
        options: dict[str, Any] = {"transport": self.transport}
        if self.is_roce:
            options.update(roce_profile=self.profile, roce_qps=self.qps, roce_timeout=self.timeout)
        return options


def may_fail(transport: str) -> bool:
    """Whether a contender's transfers may fail as a result (a RoCE QP out of retries; see
    the module's docstring): every RoCE transport of the registry."""
    return Contender.parse(transport).is_roce


def is_roce(transport: str) -> bool:
    """Whether a contender label names RoCE."""
    return Contender.parse(transport).is_roce


def requested_evs(transport: str, mrc_evs: int) -> int | None:
    """The ``--evs`` a transfer of a contender asks for: ``mrc_evs`` for an MRC transport that
    leaves the count free, none for one that fixes it (``single``) or for RoCE."""
    chosen = Contender.parse(transport).registered
    return mrc_evs if chosen.engine is Engine.MRC and chosen.evs is None else None


def evs_used(transport: str, mrc_evs: int) -> int | None:
    """How many EVs a contender's transfer runs on (None for RoCE), as recorded."""
    chosen = Contender.parse(transport).registered
    if chosen.engine is not Engine.MRC:
        return None
    return chosen.evs if chosen.evs is not None else mrc_evs


def transfer_options(transport: str) -> dict[str, Any]:
    """A contender label's ``TransferSpec`` keywords (see :meth:`Contender.transfer_options`)."""
    return Contender.parse(transport).transfer_options()


def parse_choices(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A comma-separated list of ``allowed`` names, in the order given, each once."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise ValueError(f"no {what} given (choose from {', '.join(allowed)})")
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(unknown)} (choose from {', '.join(allowed)})")
    if len(set(names)) != len(names):
        raise ValueError(f"a {what} is listed twice: {text}")
    return names


def parse_transports(text: str, roce_profiles: str = ALL_ROCE_PROFILES) -> tuple[str, ...]:
    """``mrc,single,roce`` -> the contenders' labels, checked, in the order given: a bare RoCE
    transport stands for one contender per profile of ``roce_profiles``; each label once."""
    profiles = parse_roce_profiles(roce_profiles)
    labels: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        contender = Contender.parse(part)
        if contender.is_roce and part == contender.transport:
            labels += [str(Contender(contender.transport, profile)) for profile in profiles]
        else:
            labels.append(str(contender))
    if not labels:
        raise ValueError(f"no transport given (choose from {', '.join(transport_names())})")
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise ValueError(f"a transport is listed twice: {', '.join(twice)} (in {text})")
    return tuple(labels)


def parse_roce_profiles(text: str) -> tuple[str, ...]:
    """``perftest,nccl`` -> the RoCE profiles, checked (``make experiment ROCE=``)."""
    return parse_choices(text, profile_names(), "RoCE profile")


def parse_routing(text: str) -> str:
    """One routing policy as the controller parses it, normalised (``converge`` ->
    ``converge:3``); ValueError naming the valid forms."""
    return str(RoutingPolicy.parse(text))


def parse_routings(text: str) -> tuple[str, ...]:
    """A comma-separated list of routing policies, normalised, each once."""
    routings = tuple(parse_routing(part) for part in text.split(",") if part.strip())
    if not routings:
        raise ValueError("no routing policy given (static, reactive, converge:SECONDS)")
    if len(set(routings)) != len(routings):
        raise ValueError(f"a routing policy is listed twice: {text}")
    return routings
