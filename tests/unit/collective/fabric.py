"""Ranks over a network the test schedules: verbs objects in memory, no agent.

``Fabric(n)`` gives n contexts that ``collective.rank.Rank`` drives as it drives the host API
(CQ, PD, region, QPs). A posted WRITE waits in ``in_flight`` until the test delivers it; its
bytes are read from the sender's region then, not when posted (a NIC reads memory as it
transmits), and land in the receiver's region with a receive completion carrying its
immediate. A delivered WRITE waits in ``unacked`` until the test acknowledges it; ``ack(...,
rewrite=True)`` lands its bytes once more first, as a retransmission whose ACK was lost
would. So a test chooses the order of every arrival and acknowledgement, and a rank that
reads or reuses a buffer too early gets wrong bytes. ``guard`` sees every landing before it
happens, to assert what must hold of the receiver then.

Every post is logged per rank (``posts``), for tests of what a rank sends and in what order.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.api import QpState, RecvWR, SendWR, WcOpcode, WcStatus, WorkCompletion
from collective.rank import Phase, Rank

#: Where rank r's region starts in its (pretend) address space: far apart, so that a WRITE
#: whose address is computed from the wrong rank's region falls outside any region.
REGION_BASE = 1 << 32


@dataclass
class Posted:
    """One WRITE as a rank posted it: offsets in the sender's and receiver's regions."""

    src_rank: int
    dst_rank: int
    local_offset: int
    remote_offset: int
    length: int
    imm: int


@dataclass
class Write:
    """A posted WRITE on its way: which QPs, which request, what it is."""

    src: FakeQP
    dst: FakeQP
    wr: SendWR
    posted: Posted


class FakeCQ:
    def __init__(self) -> None:
        self.entries: deque[WorkCompletion] = deque()

    def poll(self, count: int) -> list[WorkCompletion]:
        return [self.entries.popleft() for _ in range(min(count, len(self.entries)))]


@dataclass
class FakeMR:
    buf: memoryview
    addr: int
    lkey: int
    rkey: int


class FakePD:
    def __init__(self, ctx: FakeContext) -> None:
        self.ctx = ctx

    def reg_mr(self, length: int, _access: Any) -> FakeMR:
        rank = self.ctx.rank
        mr = FakeMR(memoryview(bytearray(length)), REGION_BASE * (rank + 1), rank, 100 + rank)
        self.ctx.mr = mr
        return mr


class FakeQP:
    def __init__(self, ctx: FakeContext, cq: FakeCQ, max_send_wr: int) -> None:
        self.ctx = ctx
        self.cq = cq
        self.qp_num = next(ctx.fabric.numbers)
        self.max_send_wr = max_send_wr
        self.max_wimm = 0
        self.dest: int | None = None
        self.receives = 0
        self.outstanding = 0
        ctx.fabric.qps[self.qp_num] = self

    @property
    def send_queue_free(self) -> int:
        return self.max_send_wr - self.outstanding

    def modify(self, state: QpState, **kwargs: Any) -> None:
        if state is QpState.RTR:
            self.dest = kwargs["dest_qp_num"]

    def post_recv(self, wrs: Iterable[RecvWR]) -> None:
        self.receives += len(list(wrs))

    def post_send(self, wrs: Sequence[SendWR]) -> None:
        assert self.dest is not None, "posted before RTR"
        assert self.outstanding + len(wrs) <= self.max_send_wr, "send queue overrun"
        fabric = self.ctx.fabric
        dst = fabric.qps[self.dest]
        src_mr, dst_mr = self.ctx.mr, dst.ctx.mr
        assert src_mr is not None and dst_mr is not None
        for wr in wrs:
            (sge,) = wr.sg_list
            assert sge.lkey == src_mr.lkey and wr.rkey == dst_mr.rkey
            posted = Posted(
                self.ctx.rank,
                dst.ctx.rank,
                sge.addr - src_mr.addr,
                wr.remote_addr - dst_mr.addr,
                sge.length,
                wr.imm_data if wr.imm_data is not None else -1,
            )
            assert 0 <= posted.local_offset <= len(src_mr.buf) - sge.length
            assert 0 <= posted.remote_offset <= len(dst_mr.buf) - sge.length
            fabric.posts[self.ctx.rank].append(posted)
            fabric.in_flight.append(Write(self, dst, wr, posted))
            self.outstanding += 1


@dataclass
class FakeDevice:
    ports: list[str]


class FakeContext:
    def __init__(self, fabric: Fabric, rank: int) -> None:
        self.fabric = fabric
        self.rank = rank
        self.device = FakeDevice([f"10.0.{rank}.1"])
        self.mr: FakeMR | None = None

    def create_cq(self, _depth: int) -> FakeCQ:
        return FakeCQ()

    def alloc_pd(self) -> FakePD:
        return FakePD(self)

    def create_qp(self, _pd: FakePD, send_cq: FakeCQ, _recv_cq: FakeCQ, **kwargs: Any) -> FakeQP:
        return FakeQP(self, send_cq, kwargs["max_send_wr"])


@dataclass
class Fabric:
    """n contexts and the WRITEs between them (see the module's docstring)."""

    ranks: int
    #: Called before a WRITE's bytes land: (its record, whether it is a rewrite).
    guard: Callable[[Posted, bool], None] | None = None
    contexts: list[FakeContext] = field(init=False)
    qps: dict[int, FakeQP] = field(init=False, default_factory=dict)
    numbers: itertools.count = field(init=False, default_factory=lambda: itertools.count(0x100))
    in_flight: list[Write] = field(init=False, default_factory=list)
    unacked: list[Write] = field(init=False, default_factory=list)
    posts: list[list[Posted]] = field(init=False)

    def __post_init__(self) -> None:
        self.contexts = [FakeContext(self, r) for r in range(self.ranks)]
        self.posts = [[] for _ in range(self.ranks)]

    def _land(self, write: Write, rewrite: bool) -> None:
        if self.guard is not None:
            self.guard(write.posted, rewrite)
        src_mr, dst_mr = write.src.ctx.mr, write.dst.ctx.mr
        assert src_mr is not None and dst_mr is not None
        p = write.posted
        data = bytes(src_mr.buf[p.local_offset : p.local_offset + p.length])
        dst_mr.buf[p.remote_offset : p.remote_offset + p.length] = data

    def deliver(self, write: Write) -> None:
        """The WRITE's bytes land now; the receiver gets its completion."""
        self.in_flight.remove(write)
        dst = write.dst
        assert dst.receives > 0, "a WRITE with immediate found no receive (MRC has no RNR)"
        dst.receives -= 1
        self._land(write, rewrite=False)
        dst.cq.entries.append(
            WorkCompletion(
                0,
                WcStatus.SUCCESS,
                WcOpcode.RECV_RDMA_WITH_IMM,
                dst.qp_num,
                write.posted.length,
                write.wr.imm_data,
            )
        )
        self.unacked.append(write)

    def ack(self, write: Write, rewrite: bool = False) -> None:
        """The WRITE is acknowledged (after landing once more, with ``rewrite``)."""
        self.unacked.remove(write)
        if rewrite:
            self._land(write, rewrite=True)
        write.src.outstanding -= 1
        write.src.cq.entries.append(
            WorkCompletion(write.wr.wr_id, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE, write.src.qp_num)
        )


def connect(fabric: Fabric, members: Sequence[Rank]) -> None:
    """What the job's rendezvous does: every rank's record to every rank."""
    wires = [member.setup() for member in members]
    for member in members:
        member.connect(wires)


#: Turns with nothing in flight and no rank moving before a run is declared stuck (a slow
#: rank sits most turns out).
IDLE_TURNS = 1000

#: Which in-flight WRITE a schedule delivers next: the fabric's list and a random source.
Pick = Callable[[list[Write], random.Random], Write]


def oldest(writes: list[Write], _rng: random.Random) -> Write:
    return writes[0]


def newest(writes: list[Write], _rng: random.Random) -> Write:
    """Latest first: a later step's, slice's or iteration's segments land before earlier ones."""
    return writes[-1]


def any_write(writes: list[Write], rng: random.Random) -> Write:
    return rng.choice(writes)


def run(
    fabric: Fabric,
    members: Sequence[Rank],
    pick: Pick = any_write,
    seed: int = 0,
    ack_share: float = 0.3,
    rewrite_share: float = 0.0,
    slow: Mapping[int, float] | None = None,
    limit: int = 1_000_000,
) -> None:
    """Drive the ranks to the end (starting those not started): each turn every rank
    progresses (in a random order; rank r sits the turn out with probability ``slow[r]``, as
    a rank whose thread is busy elsewhere), then one event happens, a delivery (``pick``
    chooses which) or, with ``ack_share`` or when nothing is in flight, an acknowledgement of
    a random delivered WRITE (a rewrite with ``rewrite_share``). AssertionError if they stop
    short of the end."""
    rng = random.Random(seed)
    slow = slow or {}
    for member in members:
        if member.phase is Phase.READY:  # a test may have started them and moved a few turns
            member.start()
    idle = 0
    for _ in range(limit):
        for member in rng.sample(list(members), len(members)):
            if rng.random() >= slow.get(member.rank, 0.0):
                idle = 0 if member.progress() else idle
        if all(member.finished for member in members):
            return
        if fabric.unacked and (not fabric.in_flight or rng.random() < ack_share):
            fabric.ack(rng.choice(fabric.unacked), rewrite=rng.random() < rewrite_share)
        elif fabric.in_flight:
            fabric.deliver(pick(fabric.in_flight, rng))
        else:
            # Nothing on the wire: only a rank's own progress can move the job now.
            idle += 1
            if idle > IDLE_TURNS:
                waiting = "; ".join(m.waiting_for() for m in members if not m.finished)
                raise AssertionError(f"nothing in flight and the ranks are stuck: {waiting}")
    raise AssertionError(f"not done after {limit} turns")
