"""A collective job on a simulated fabric: the testbed's plans and arithmetic, run in simulated
time.

Each host is one rank (in the topology's host order). Every rank runs its
:func:`collective.plans.make_plan` plan in the order ``collective.rank`` runs it on an agent:
its prologue copies, then each step's sends (WRITE WITH IMMEDIATE into the peer's region, the
immediate naming the step as ``collective.rank.immediate`` does), and once every byte the step
expects has arrived its reductions (``collective.data``), which the next step's sends read.
Unlike ``collective.rank``, a send is one WRITE (no 256 KiB segments, no slices), and over
several RoCE QPs it is striped across them rather than sent segment by segment in turn: times
are comparable with the testbed's for chunks of a segment or less. A rank reacts to
each arrival at the simulated time it happens (``SimHost.on_event``). One iteration; the job is
done when every rank has finished its steps and its writes are acknowledged, and fails at the
first write that fails (as an NCCL communicator aborts). Results are compared with the exact
expected ones (every input a small integer in float32, so every sum is exact).

Over RoCE each pair of ranks has the setup's QPs and a send is striped over them, as a transfer
is; MRC has one QP per pair and sprays it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from agent.core.connection import ConnectionClosed
from agent.core.events import Event, MessageAcked, MessageFailed, MessageReceived
from agent.core.memory import MemoryRegion
from agent.core.messages import SendQueueFull
from agent.sim.host import SimHost
from collective.data import apply_copy, apply_reduce, expected, fill_input, floats
from collective.plans import ELEMENT_BYTES, Buf, Collective, Plan, Step, make_plan
from collective.rank import immediate
from simulation.fabric import SimFabric
from simulation.permutation import stripes
from simulation.run import Meter, RunCost, run_until

#: The step in an immediate (``collective.rank.immediate``: bits 15-0).
_STEP_MASK = 0xFFFF


@dataclass(frozen=True)
class CollectiveResult:
    """One job: when it ended or why it failed, whether every rank's result is exact, and what
    the run cost."""

    collective: Collective
    ranks: int
    size: int
    completed_s: float | None
    failed: str | None
    #: Ranks whose result differs from the exact one (None: not checked, or not completed).
    wrong_ranks: int | None
    cost: RunCost

    @property
    def algbw(self) -> float | None:
        """Bytes per second of the buffer, as nccl-tests reports it (size over time)."""
        return None if not self.completed_s else self.size / self.completed_s

    @property
    def busbw(self) -> float | None:
        """``algbw`` times the collective's bus factor: comparable with the link rate."""
        algbw = self.algbw
        return None if algbw is None else algbw * self.collective.bus_factor(self.ranks)


class _Rank:
    """One rank's progress through its plan on its host."""

    def __init__(self, job: _Job, index: int, host: SimHost, plan: Plan) -> None:
        self.job = job
        self.index = index
        self.host = host
        self.plan = plan
        self.buffer = bytearray(plan.layout.region_bytes)
        self.view = memoryview(self.buffer)
        fill_input(self.view, plan)
        self.region: MemoryRegion = host.endpoint.register_memory(self.buffer)
        #: Per peer its QPs at this end, and per QP of this end the peer it leads to.
        self.qps: dict[int, tuple[int, ...]] = {}
        self.peer_of: dict[int, int] = {}
        self.step = 0
        #: Bytes arrived per (peer, step).
        self.arrived: Counter[tuple[int, int]] = Counter()
        self.unacked = 0
        self.steps_done = False

    def begin(self) -> None:
        for op in self.plan.prologue:
            apply_copy(self.view, self.plan.layout, op)
        if self.plan.steps:
            self._send(self.plan.steps[0])
        self._advance()

    def on_event(self, now: float, event: Event) -> None:
        if self.job.ended_at is not None:
            return  # an aborted job posts nothing more
        if isinstance(event, MessageReceived):
            peer = self.peer_of.get(event.qp)
            if peer is not None and event.immediate is not None:
                self.arrived[(peer, event.immediate & _STEP_MASK)] += event.length
                self._advance()
        elif isinstance(event, MessageAcked) and event.qp in self.peer_of:
            self.unacked -= 1
            self.job.maybe_done(now)
        elif isinstance(event, MessageFailed) and event.qp in self.peer_of:
            self.job.fail(now, f"rank {self.index} ({self.host.name}): {event.reason}")

    def _advance(self) -> None:
        """Finish every step whose arrivals are all in, sending the next one's data."""
        steps = self.plan.steps
        layout = self.plan.layout
        moved = False
        while self.step < len(steps):
            step = steps[self.step]
            if not self._all_arrived(step):
                break
            for op in step.reduces:
                apply_reduce(self.view, layout, op)
            self.step += 1
            moved = True
            if self.step < len(steps):
                self._send(steps[self.step])
        if self.step >= len(steps) and not self.steps_done:
            self.steps_done = True
            self.job.maybe_done(self.job.fabric.scheduler.now)
        if moved:
            self.host.pump_soon()

    def _all_arrived(self, step: Step) -> bool:
        wanted: Counter[int] = Counter()
        for recv in step.recvs:
            wanted[recv.peer] += recv.length
        return all(self.arrived[(peer, self.step)] >= length for peer, length in wanted.items())

    def _send(self, step: Step) -> None:
        layout = self.plan.layout
        imm = immediate(0, self.step)
        for send in step.sends:
            peer = self.job.ranks[send.peer]
            qps = self.qps[send.peer]
            source = layout.offset(send.src) + send.src_offset
            target = peer.region.va + layout.offset(send.dst) + send.dst_offset
            for qp, (start, end) in zip(qps, stripes(send.length, len(qps)), strict=True):
                if start == end:
                    continue
                data = bytes(self.view[source + start : source + end])
                try:
                    self.host.endpoint.post_write(qp, data, target + start, peer.region.rkey, imm)
                except (ConnectionClosed, SendQueueFull) as error:  # a dead or full QP
                    self.job.fail(self.job.fabric.scheduler.now, f"rank {self.index}: {error}")
                    return
                self.unacked += 1
        self.host.pump_soon()


class _Job:
    def __init__(self, fabric: SimFabric, collective: Collective, size: int) -> None:
        self.fabric = fabric
        names = [host.name for host in fabric.topology.hosts]
        self.ranks = [
            _Rank(self, index, fabric.hosts[name], make_plan(collective, index, len(names), size))
            for index, name in enumerate(names)
        ]
        for rank in self.ranks:
            for peer in rank.plan.peers:
                self._join(rank, self.ranks[peer])
        self.ended_at: float | None = None
        self.failure: str | None = None

    def _join(self, one: _Rank, other: _Rank) -> None:
        if other.index in one.qps:
            return
        qps_one, qps_other = self.fabric.pair(one.host.name, other.host.name)
        one.qps[other.index] = qps_one
        other.qps[one.index] = qps_other
        one.peer_of.update(dict.fromkeys(qps_one, other.index))
        other.peer_of.update(dict.fromkeys(qps_other, one.index))

    def has_ended(self) -> bool:
        return self.ended_at is not None

    def maybe_done(self, now: float) -> None:
        if self.ended_at is None and all(r.steps_done and r.unacked == 0 for r in self.ranks):
            self.ended_at = now

    def fail(self, now: float, reason: str) -> None:
        if self.failure is None and self.ended_at is None:
            self.failure = reason
            self.ended_at = now

    def wrong_ranks(self) -> int:
        """Ranks whose result is not the exact one; all-reduce's expected sum computed once."""
        cache: dict[tuple[Collective, int], tuple[int, np.ndarray]] = {}
        wrong = 0
        for rank in self.ranks:
            plan = rank.plan
            key = (plan.collective, 0 if plan.collective is Collective.ALLREDUCE else rank.index)
            if key not in cache:
                cache[key] = expected(plan)
            offset, want = cache[key]
            got = floats(rank.view, plan.layout, Buf.OUT, offset, want.size * ELEMENT_BYTES)
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                wrong += 1
        return wrong


def run_collective(
    fabric: SimFabric,
    collective: Collective,
    size: int,
    *,
    limit_s: float = 10.0,
    check: bool = True,
) -> CollectiveResult:
    """One iteration of ``collective`` on ``size`` bytes over every host of ``fabric`` (one
    rank each), until it ends or ``limit_s`` simulated seconds pass; failures and cuts are
    whatever the caller scheduled on the fabric."""
    meter = Meter()
    job = _Job(fabric, collective, size)
    try:
        for rank in job.ranks:
            rank.host.on_event = rank.on_event
        for rank in job.ranks:
            rank.begin()
        run_until(fabric.scheduler, limit_s, job.has_ended, stop=job.has_ended)
    finally:
        for rank in job.ranks:
            rank.host.on_event = None
    completed = job.ended_at if job.failure is None else None
    return CollectiveResult(
        collective=collective,
        ranks=len(job.ranks),
        size=size,
        completed_s=completed,
        failed=job.failure
        or (None if completed is not None else f"not done after {limit_s} simulated s"),
        wrong_ranks=job.wrong_ranks() if check and completed is not None else None,
        cost=meter.cost(fabric),
    )
