"""The failover experiment's knobs and modes: every transport under every routing policy at
every placement of the cut."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.intent.policy import RoutingPolicy
from experiments.json_form import TEXT
from experiments.placements import CutChoice, Placement
from experiments.transports import (
    ALL_ROCE_PROFILES,
    parse_choices,
    parse_routings,
    parse_transports,
)

#: How long before the cut the counters are read (the probe must not delay the cut).
PROBE_LEAD_S = 1.0


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 20.0
    cut_at_s: float = 5.0
    restore_at_s: float = 12.0
    bin_s: float = 0.1
    #: The flows, ``SOURCE:DESTINATION`` separated by commas; each source on another leaf
    #: than its destination.
    flows: str = "h1:h3"
    transports: str = "mrc,single,roce"
    #: Both by default: under ``static`` nothing reroutes a one-path flow, so a RoCE QP on the
    #: cut path dies; under ``converge:3`` the fabric reroutes it and its cost is its stall.
    routings: str = "static,converge:3"
    placements: str = Placement.REMOTE.value
    #: Which of a placement's candidates breaks: ``random`` (drawn per seed, the same for
    #: every contender of the seed) or ``busiest`` (the single-path flow's own path).
    cut_choice: str = CutChoice.RANDOM.value
    mrc_evs: int = 256
    #: Small messages, so that 100 ms bins hold many completions rather than one or two.
    message_size: int = 8192
    lldp_interval_ms: int = 50
    #: The RoCE profiles a bare ``roce`` stands for (``make experiment ROCE=``).
    roce_profiles: str = ALL_ROCE_PROFILES
    #: ``switch``: its links go dark as a powered-off switch's do (False, bmv2 only: the
    #: process dies and its ports stay lit, a hung switch its neighbours keep sending into).
    switch_dark: bool = True

    def check(self) -> None:
        """ValueError for timings, flows or mode lists that cannot work."""
        if not PROBE_LEAD_S < self.cut_at_s < self.restore_at_s < self.duration_s:
            raise ValueError(
                f"need {PROBE_LEAD_S} < cut_at_s < restore_at_s < duration_s, got "
                f"{self.cut_at_s}, {self.restore_at_s}, {self.duration_s}"
            )
        if self.bin_s <= 0 or self.mrc_evs < 1 or self.message_size < 1:
            raise ValueError("bin_s, mrc_evs and message_size must be positive")
        self.flow_pairs()
        self.choice()
        modes_of(self)

    def flow_pairs(self) -> list[tuple[str, str]]:
        """``flows`` as (source, destination) pairs; ValueError when malformed."""
        return parse_flows(self.flows)

    def choice(self) -> CutChoice:
        """``cut_choice`` as a choice; ValueError for an unknown one."""
        if self.cut_choice not in tuple(CutChoice):
            raise ValueError(
                f"unknown cut choice {self.cut_choice} (choose one of {', '.join(CutChoice)})"
            )
        return CutChoice(self.cut_choice)

    def placement_list(self) -> tuple[Placement, ...]:
        """``placements`` as placements, in the order given; ValueError for an unknown one."""
        names = parse_choices(self.placements, tuple(Placement), "placement")
        return tuple(Placement(name) for name in names)


def parse_flows(text: str) -> list[tuple[str, str]]:
    """``h1:h3,h2:h4`` -> [("h1", "h3"), ("h2", "h4")]; each pair once, two hosts each."""
    pairs = []
    for part in (p.strip() for p in text.split(",")):
        source, sep, destination = part.partition(":")
        if not sep or not source or not destination or ":" in destination:
            raise ValueError(f"flow {part!r}: expected SOURCE:DESTINATION, e.g. h1:h3")
        if source == destination:
            raise ValueError(f"flow {part!r}: a flow needs two hosts")
        pairs.append((source, destination))
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"a flow is listed twice: {text}")
    return pairs


@dataclass(frozen=True)
class FailoverMode:
    """One mode: a contender (``experiments.transports``: ``mrc``, ``roce:nccl``) under a
    controller routing policy, the fabric broken at a placement. Its label is
    ``TRANSPORT-ROUTING-PLACEMENT`` (``mrc-static-remote``, ``roce:nccl-converge:3-switch``)."""

    transport: str
    routing: RoutingPolicy = field(metadata=TEXT)
    placement: Placement

    def __str__(self) -> str:
        return f"{self.transport}-{self.routing}-{self.placement}"

    @classmethod
    def parse(cls, label: str) -> FailoverMode:
        """The mode a label names (a mode key of summary.json); ValueError if it names none."""
        transport, routing, placement = label.split("-", 2)
        return cls(transport, RoutingPolicy.parse(routing), Placement(placement))


def modes_of(params: Params) -> tuple[FailoverMode, ...]:
    """Every combination, policy by policy, then placement by placement, then transport."""
    transports = parse_transports(params.transports, params.roce_profiles)
    routings = [RoutingPolicy.parse(routing) for routing in parse_routings(params.routings)]
    return tuple(
        FailoverMode(transport, routing, placement)
        for routing in routings
        for placement in params.placement_list()
        for transport in transports
    )
