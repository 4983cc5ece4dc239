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

from agent.io.transport import transport_names
from controller.intent.policy import RoutingPolicy

MRC = "mrc"
SINGLE = "single"
ROCE = "roce"
#: Transports whose transfers may fail as a result (see the module's docstring).
MAY_FAIL = (ROCE,)
STATIC = "static"


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
