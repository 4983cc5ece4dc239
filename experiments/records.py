"""What a run leaves behind, as the runner and the experiments exchange it: each transfer's
figures (:class:`Transfer`), an experiment's record of a run (any frozen dataclass with its
``transfers``, :class:`RunRecord`), and that record with what the runner measured around it
(:class:`Run`: the window, the CPU load, each link's utilisation, the verdict, its place in
the run order). summary.json's ``runs`` holds them per mode and seed (``json_form``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeAlias, TypeVar

from experiments.bottleneck import LinkUtilisation, RunBottleneck
from experiments.cpu_load import CpuLoad
from experiments.json_form import FLAT, OMIT_NONE


@dataclass(frozen=True)
class AgentCounters:
    """What the agent counted of a transfer that gave a result, besides its retransmits."""

    #: SACK-gap losses the sender later saw disproved (it widens its reordering window).
    spurious_losses: int
    #: EVs those disproved losses had retired, given their slot back at once.
    evs_reinstated: int
    trims_seen: int
    ecn_echoes: int
    timeouts: int
    tail_probes: int
    ev_probes_sent: int
    data_packets_sent: int
    #: Copies the receiver already had: retransmissions that were not needed (a late packet
    #: taken for lost), as opposed to repairs.
    duplicates_received: int


@dataclass(frozen=True)
class Failure:
    """Why a transfer did not complete, and when on the run's clock where the experiment
    timed it."""

    error: str
    failed_at_s: float | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class AgentFailure(Failure):
    """A transfer the agent started and reported failed: its error code (None: the agent
    never answered) and the bytes it had confirmed before."""

    error_code: str | None = None
    bytes_confirmed: int = 0


@dataclass(frozen=True)
class CutFailure(AgentFailure):
    """A failover transfer's failure, and how long after the cut it came (None: before any
    cut)."""

    failed_after_cut_s: float | None = None


@dataclass(frozen=True)
class Transfer:
    """One transfer's figures: bytes the application posted (``bytes_sent``; None when
    unknown), delivered, and their difference, which a reliable transport must keep 0
    (``bytes_lost``; None when unknown), whether it completed, its goodput, and its
    retransmissions by cause; the agent's counters where it gave a result, the failure where
    it did not complete, its longest stall where the experiment measures one."""

    bytes_sent: int | None
    bytes_delivered: int | None
    bytes_lost: int | None
    completed: bool
    goodput_bps: float
    retransmits: Mapping[str, int]
    retransmits_total: int | None = field(default=None, metadata=OMIT_NONE)
    counters: AgentCounters | None = field(default=None, metadata=FLAT)
    failure: Failure | None = field(default=None, metadata=FLAT)
    longest_stall_s: float | None = field(default=None, metadata=OMIT_NONE)

    @property
    def error(self) -> str | None:
        return None if self.failure is None else self.failure.error

    @property
    def failed_at_s(self) -> float | None:
        return None if self.failure is None else self.failure.failed_at_s


class RunRecord(Protocol):
    """An experiment's record of one run: at least its transfers, by name."""

    @property
    def transfers(self) -> Mapping[str, Transfer]: ...


RecordT = TypeVar("RecordT", bound=RunRecord)
ModeT = TypeVar("ModeT", bound=Hashable)


@dataclass(frozen=True)
class Run(Generic[RecordT]):
    """An experiment's record of one run and what the runner measured around it: the run's
    window, each core's load, each fabric link direction's utilisation (None: unread), the
    verdict on what limited it, and its place in the order runs were made."""

    record: RecordT = field(metadata=FLAT)
    window_s: float
    cpu: CpuLoad
    link_utilisation: Mapping[str, LinkUtilisation | None]
    bottleneck: RunBottleneck
    sequence: int

    @property
    def transfers(self) -> Mapping[str, Transfer]:
        return self.record.transfers


#: Every run of an experiment: per mode, per seed.
Runs: TypeAlias = Mapping[ModeT, Mapping[int, Run[RecordT]]]
