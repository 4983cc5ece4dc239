"""The incast experiment's knobs, its two fabrics, and who sends to whom."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from experiments.paths import fabric_hops
from topologies.model import Topology


class Fabric(StrEnum):
    """A mode: the fabric with ECN marking and trimming, or without either."""

    ECN_TRIM_ON = "ecn_trim_on"
    ECN_TRIM_OFF = "ecn_trim_off"


MODES = (Fabric.ECN_TRIM_ON, Fabric.ECN_TRIM_OFF)


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``); hosts are names, senders a comma list."""

    receiver: str = "h1"
    senders: str = "h5,h9,h13"
    victim_source: str = "h6"
    victim_destination: str = "h2"
    #: Bytes each sender sends to the receiver.
    incast_bytes: int = 131072
    victim_duration_s: float = 18.0
    incast_at_s: float = 3.0
    bin_s: float = 0.25
    evs: int = 256
    message_size: int = 16384
    fabric_rate_pps: int = 100
    receiver_rate_pps: int = 100
    queue_depth: int = 32
    trim_threshold: int = 24
    ecn_min: int = 8
    ecn_max: int = 20
    lldp_interval_ms: int = 100

    @property
    def sender_hosts(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.senders.split(",") if name.strip())

    def check(self) -> None:
        """ValueError for settings that cannot make an incast with a victim."""
        senders = self.sender_hosts
        if not senders or len(set(senders)) != len(senders):
            raise ValueError(f"senders must name distinct hosts, got {self.senders!r}")
        hosts = (self.receiver, self.victim_source, self.victim_destination, *senders)
        if len(set(hosts)) != len(hosts):
            raise ValueError(
                "receiver, senders, victim_source and victim_destination must all differ"
            )
        if not 0 < self.incast_at_s < self.victim_duration_s:
            raise ValueError("need 0 < incast_at_s < victim_duration_s")
        if min(self.incast_bytes, self.evs, self.message_size, self.fabric_rate_pps) < 1:
            raise ValueError("incast_bytes, evs, message_size and fabric_rate_pps must be >= 1")
        if self.receiver_rate_pps < 1 or self.bin_s <= 0:
            raise ValueError("receiver_rate_pps must be >= 1 and bin_s positive")
        if not self.ecn_min <= self.ecn_max < self.queue_depth:
            raise ValueError("need ecn_min <= ecn_max < queue_depth")
        if not self.trim_threshold < self.queue_depth:
            raise ValueError("trim_threshold must be below queue_depth")


def modes_of(params: Params) -> tuple[Fabric, ...]:
    """Both fabrics, whatever the parameters."""
    del params
    return MODES


def shared_hops(topology: Topology, params: Params) -> list[str]:
    """The switch-to-switch hops both the victim and some incast sender may cross; a
    ValueError when there are none (the victim would not be a victim)."""
    incast = frozenset().union(
        *(fabric_hops(topology, sender, params.receiver) for sender in params.sender_hosts)
    )
    shared = fabric_hops(topology, params.victim_source, params.victim_destination) & incast
    if not shared:
        raise ValueError(
            f"{topology.name}: the victim {params.victim_source}->{params.victim_destination} "
            f"shares no switch-to-switch link with the incast into {params.receiver}"
        )
    return sorted(shared)


def victim_name(params: Params) -> str:
    return f"victim:{params.victim_source}->{params.victim_destination}"


def incast_name(sender: str, params: Params) -> str:
    return f"incast:{sender}->{params.receiver}"
