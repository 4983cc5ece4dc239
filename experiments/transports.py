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

A tree whose agent or controller lacks the option is refused before anything is brought up
(:func:`missing_support`), except where the option would only ask for what it does anyway:
MRC on one EV is ``--evs 1``, and ``reactive`` is the behaviour of a controller without a
policy.
"""

from __future__ import annotations

from controller.intent.policy import RoutingPolicy
from testbed.agents import TRANSPORTS, agent_has_transports
from testbed.session import controller_has_routing

MRC = "mrc"
SINGLE = "single"
ROCE = "roce"
#: Transports whose transfers may fail as a result (see the module's docstring).
MAY_FAIL = (ROCE,)
STATIC = "static"
REACTIVE = "reactive"


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
    return parse_choices(text, TRANSPORTS, "transport")


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


def missing_support(transports: tuple[str, ...], routings: tuple[str, ...]) -> list[str]:
    """What this tree's agent and controller lack for ``transports`` and ``routings``, one
    sentence each (empty: everything can run)."""
    missing = []
    if ROCE in transports and not agent_has_transports():
        missing.append(
            "transport roce: this tree's agent has no --transport (its perf request takes "
            "no 'transport'); run with transports=mrc,single until it has"
        )
    policies = [routing for routing in routings if routing != REACTIVE]
    if policies and not controller_has_routing():
        missing.append(
            f"routing {', '.join(policies)}: this tree's controller has no --routing "
            "(testbed.controller_run.ControllerRun takes no 'routing'); run with "
            "routings=reactive, its only behaviour, until it has"
        )
    return missing


def controller_routing(routing: str | None) -> str | None:
    """The policy to start the controller with: None (its default) for none asked, and for
    ``reactive`` on a controller that has no policy option (reactive is all it does)."""
    if routing is None or (routing == REACTIVE and not controller_has_routing()):
        return None
    return routing
