"""The collective experiment's knobs and modes: every transport in every scenario."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from collective.job import JobError, JobSpec
from collective.plans import parse_collective, round_size
from collective.rank import DEFAULT_SLICES
from experiments.topology_variant import Variant
from experiments.transports import (
    parse_choices,
    parse_routing,
    parse_transports,
    transfer_options,
)


class Scenario(StrEnum):
    """What happens to the job (see the package's docstring)."""

    CLEAN = "clean"
    CUT_STATIC = "cut-static"
    CUT_CONVERGE = "cut-converge"
    SECOND_JOB = "second-job"
    LOSS = "loss"

    @property
    def evented(self) -> bool:
        """Whether something happens mid-job (a cut, a second job)."""
        return self in (Scenario.CUT_STATIC, Scenario.CUT_CONVERGE, Scenario.SECOND_JOB)


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    collective: str = "allreduce"
    #: Bytes of the buffer (rounded down to 4 x ranks).
    size: int = 256 << 10
    iterations: int = 10
    #: The contenders (``experiments.transports``); a bare ``roce`` is every profile of
    #: ``roce_profiles``.
    transports: str = "mrc,single,roce"
    #: The RoCE a training job runs: NCCL's settings (``nccl``) and NCCL's on a NIC with
    #: selective repeat and an adaptive timer (``adaptive``), each over NCCL's two QPs to a
    #: peer (perftest's 67 ms timer is a benchmark's, not a training job's: ``make
    #: experiment ROCE=`` adds it).
    roce_profiles: str = "nccl,adaptive"
    scenarios: str = ",".join(Scenario)
    #: Ranks' hosts in ring order ("": every host, ring ordered across the leaves).
    hosts: str = ""
    compute_s: float = 0.0
    #: Packets/s of every switch-to-switch link (docs/experiments.md says how it was chosen).
    fabric_rate_pps: int = 200
    fabric_queue_depth: int = 32
    trim_threshold: int = 24
    ecn_min: int = 8
    ecn_max: int = 20
    #: LLDP every 200 ms: a probe behind a full queue (32 packets at 200/s: 160 ms) is still
    #: in time for the controller's three-missed rule.
    lldp_interval_ms: int = 200
    #: The event comes this many iterations into the job, plus half an iteration.
    event_after: int = 3
    #: The link cut, ``SPINE:LEAF`` (a spine's downlink into the leaf).
    cut: str = "s1:l2"
    converge_s: float = 3.0
    loss_percent: float = 1.0
    second_iterations: int = 3
    segment_bytes: int = 64 << 10
    #: Slices each ring step is cut into, pipelined (docs/collective.md; 1: lockstep).
    slices: int = DEFAULT_SLICES
    #: The launcher's watchdog: longer than an nccl QP takes to give up on a dead path
    #: (eight 4.3 s timeouts, 34 s), so that a RoCE job dies of its own retries, as under
    #: NCCL, whose watchdog waits minutes, rather than of the launcher's.
    stall_timeout_s: float = 40.0
    #: Payload bytes of a full data packet (the agents' ``--payload``).
    payload_bytes: int = 1024

    def check(self) -> None:
        """ValueError for settings that cannot work."""
        parse_collective(self.collective)
        modes = modes_of(self)
        for mode in modes:
            try:
                self.job_spec(mode.transport, ranks=1).roce()
            except JobError as error:
                raise ValueError(f"{mode.transport}: {error}") from None
        if self.iterations < 1:
            raise ValueError("need iterations >= 1")
        # only a scenario with an event needs it to fall within the job
        evented = any(mode.scenario.evented for mode in modes)
        if evented and not 0 <= self.event_after < self.iterations:
            raise ValueError("a scenario with an event needs 0 <= event_after < iterations")
        if self.fabric_rate_pps < 1 or self.size < 1 or self.segment_bytes < 1:
            raise ValueError("fabric_rate_pps, size and segment_bytes must be positive")
        if not 0 <= self.loss_percent <= 50 or self.converge_s < 0:
            raise ValueError("loss_percent must be in 0..50, converge_s >= 0")
        if not self.ecn_min <= self.ecn_max < self.fabric_queue_depth:
            raise ValueError("need ecn_min <= ecn_max < fabric_queue_depth")
        if not self.trim_threshold < self.fabric_queue_depth:
            raise ValueError("trim_threshold must be below fabric_queue_depth")
        cut_ends(self)

    def job_spec(self, transport: str, ranks: int, iterations: int | None = None) -> JobSpec:
        """The job of a run, in a contender's transport (``roce:nccl:4qp``: RoCE with the
        nccl profile over four QPs to each peer)."""
        return JobSpec(
            parse_collective(self.collective),
            round_size(self.size, ranks),
            iterations=iterations or self.iterations,
            compute_s=self.compute_s,
            segment_bytes=self.segment_bytes,
            slices=self.slices,
            stall_timeout_s=self.stall_timeout_s,
            **transfer_options(transport),
        )


def cut_ends(params: Params) -> tuple[str, str]:
    """``s1:l2`` -> ("s1", "l2")."""
    spine, _, leaf = params.cut.partition(":")
    if not spine or not leaf:
        raise ValueError(f"cut {params.cut!r}: expected SPINE:LEAF (s1:l2)")
    return spine, leaf


@dataclass(frozen=True)
class CollectiveMode:
    """One mode: a contender (``experiments.transports``) in a scenario. Its label is
    ``TRANSPORT-SCENARIO`` (``mrc-cut-static``, ``roce:nccl-loss``)."""

    transport: str
    scenario: Scenario

    def __str__(self) -> str:
        return f"{self.transport}-{self.scenario}"

    @classmethod
    def parse(cls, label: str) -> CollectiveMode:
        """The mode a label names (a mode key of summary.json); ValueError if it names none."""
        transport, _, scenario = label.partition("-")
        return cls(transport, Scenario(scenario))


def modes_of(params: Params) -> tuple[CollectiveMode, ...]:
    """Scenario by scenario, the transports side by side."""
    transports = parse_transports(params.transports, params.roce_profiles)
    scenarios = parse_choices(params.scenarios, tuple(Scenario), "scenario")
    return tuple(CollectiveMode(t, Scenario(s)) for s in scenarios for t in transports)


def variant(params: Params, mode: CollectiveMode) -> Variant:
    """Slowed fabric links; ``static`` routing but for the converge scenario."""
    routing = (
        f"converge:{params.converge_s:g}" if mode.scenario == Scenario.CUT_CONVERGE else "static"
    )
    return Variant(
        fabric_rate_pps=params.fabric_rate_pps,
        fabric_queue_depth=params.fabric_queue_depth,
        trim_threshold=params.trim_threshold,
        ecn_thresholds=(params.ecn_min, params.ecn_max),
        lldp_interval_ms=params.lldp_interval_ms,
        routing=parse_routing(routing),
    )
