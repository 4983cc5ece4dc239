"""What the failover and loss experiments compare: transports, and the fabric's routing policy.

Transports (``mrc-agent --transport``): ``mrc`` (MRC spraying over its EVs), ``single`` (MRC
on one EV: what spraying alone adds) and ``roce`` (a RoCEv2 RC connection on one path, go-back-N,
a local ACK timeout with ``retry_cnt`` retries). A RoCE transfer whose retries run out fails
the way a training job stops: that is a result to record (its error, when it failed), not an
error of the experiment. MRC is reliable by design; an MRC transfer that fails or loses a byte
is an error, on one EV as on many.

Routing policies (``mrc-controller run --routing``): ``static`` (MRC's deployment: each switch
prunes only its own dead next hops), ``reactive`` (every cut rerouted fabric-wide at once) and
``converge:SECONDS`` (``reactive``, delayed as a routing protocol's reconvergence would be).
"""

from __future__ import annotations

from agent.io.transport import Engine, transport_named, transport_names
from controller.intent.policy import RoutingPolicy

MRC = "mrc"
SINGLE = "single"
ROCE = "roce"
STATIC = "static"


def may_fail(transport: str) -> bool:
    """Whether the transport's transfers may fail as a result (a RoCE QP out of retries; see
    the module's docstring): every RoCE transport of the registry."""
    return transport_named(transport).is_roce


def requested_evs(transport: str, mrc_evs: int) -> int | None:
    """The ``--evs`` a transfer of ``transport`` asks for: ``mrc_evs`` for an MRC transport that
    leaves the count free, none for one that fixes it (``single``) or for RoCE."""
    chosen = transport_named(transport)
    return mrc_evs if chosen.engine is Engine.MRC and chosen.evs is None else None


def evs_used(transport: str, mrc_evs: int) -> int | None:
    """How many EVs a transfer of ``transport`` runs on (None for RoCE), as recorded."""
    chosen = transport_named(transport)
    if chosen.engine is not Engine.MRC:
        return None
    return chosen.evs if chosen.evs is not None else mrc_evs


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


def parse_transports(text: str) -> tuple[str, ...]:
    """``mrc,single,roce`` -> the transports, checked."""
    return parse_choices(text, transport_names(), "transport")


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
