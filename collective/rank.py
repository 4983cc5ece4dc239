"""One rank of a job: its plan, run over its host's agent through the host API.

A rank holds one context on its host's agent, one CQ, one registered region (laid out by
its plan) and the QPs to each peer its plan names: one MRC QP (its EVs spread it over the
paths), or for RoCE as many RC QPs as the job's settings say (``collective.roce``), over
which its WRITEs to that peer go round-robin, each whole, as NCCL's messages go over its
channels' connections. ``setup`` makes them and returns what the peers need (``RankWire``:
the QPs' numbers and first PSNs, the region's address and R_Key, the host's plane
addresses); ``connect`` takes every rank's and moves the QPs to RTS; then
``progress`` is called whenever the agent may have said something, and runs the state
machine as far as it can without waiting:

    COMPUTE (optional, between iterations) -> STEP (every step, sliced) -> DRAIN -> next iteration

In STEP every step of the plan is cut into ``slices`` slices (``Step.sliced``), and the
pipeline (``collective.pipeline``) says which (step, slice) units may go: slice j of step k+1
once slice j of step k arrived and was reduced; with one slice, step after step. A unit posts
its WRITEs (each slice of a chunk cut into segments of at most ``segment_bytes``, every
segment a signalled WRITE WITH IMMEDIATE whose immediate names the iteration, step and slice),
then waits until every segment it expects has arrived (a receive completion carrying the same
immediate, from a QP of the peer that sends it), then reduces. Immediates are counted per
(immediate, peer), not matched in order, so segments and slices may complete in any order
(over several QPs they do) and a fast neighbour's later-step or next-iteration segments may
arrive early. DRAIN waits for the rank's own WRITEs to be acknowledged before the next
iteration overwrites what they read; a stage slot's slice is written once an iteration and
reduced before its slice moves on, and its next write comes only after that reduction (the
ring's causality, or for reduce-scatter the other bank: ``collective.plans``).

Any completion in error (a QP out of retries, a flushed request) fails the rank with the
completion's status and reason: the job stops, as an NCCL communicator aborts.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from agent.api import (
    CQ,
    MR,
    PD,
    QP,
    Access,
    ApiError,
    Context,
    QpState,
    QpType,
    RecvWR,
    SendFlags,
    SendWR,
    Sge,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from collective.data import Verdict, apply_copy, apply_reduce, fill_input, verify
from collective.pipeline import Pipeline, Unit
from collective.plans import MAX_SLICES, Plan
from collective.report import RankIteration
from collective.roce import RoceSettings

#: Largest WRITE a rank posts; a chunk is cut into segments of at most this.
DEFAULT_SEGMENT_BYTES = 256 << 10
#: Slices a ring step is cut into unless the job says (docs/collective.md: measured).
DEFAULT_SLICES = 1
#: Send and receive queue depth of each QP.
SEND_DEPTH = 256
RECV_DEPTH = 512
#: Most completions taken from the CQ per poll call.
POLL_BATCH = 64


class Phase(Enum):
    """Where a rank is in its iteration."""

    READY = "ready"
    COMPUTE = "compute"
    STEP = "step"
    DRAIN = "drain"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class RankWire:
    """What a rank's peers need to write to it (OCP's examples' ``struct wire``, per rank)."""

    rank: int
    ports: tuple[str, ...]
    addr: int
    rkey: int
    #: peer -> (our QP number towards that peer, the first PSN that QP sends) for each of our
    #: QPs towards it, in the order the peer pairs its own with them
    qps: dict[int, tuple[tuple[int, int], ...]]

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "ports": list(self.ports),
            "addr": self.addr,
            "rkey": self.rkey,
            "qps": {str(peer): [list(qp) for qp in qps] for peer, qps in self.qps.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RankWire:
        """The inverse of :meth:`to_json`; ValueError for a malformed record."""
        try:
            return cls(
                int(data["rank"]),
                tuple(str(p) for p in data["ports"]),
                int(data["addr"]),
                int(data["rkey"]),
                {
                    int(peer): tuple((int(qp[0]), int(qp[1])) for qp in qps)
                    for peer, qps in data["qps"].items()
                },
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"malformed rank record: {exc!r}") from None


def immediate(iteration: int, step: int, slice_index: int = 0) -> int:
    """The immediate every segment of slice ``slice_index`` of ``step`` in ``iteration``
    carries: the slice in bits 31-24, the iteration modulo 256 in 23-16, the step in 15-0.

    16 bits of step cover a ring of 2(N-1) steps for every N whose sums stay exact
    (``collective.data``: 2^14 ranks). The iteration only has to tell a neighbour's next
    iteration from this one (a neighbour is never two ahead: it cannot finish an iteration
    before this rank has sent its part), so 8 bits are plenty. Slice 0 leaves the top byte
    clear: a job of one slice sends the immediates it sent before slices existed.
    """
    if not 0 <= slice_index < MAX_SLICES:
        raise ValueError(f"slice {slice_index} is outside 0..{MAX_SLICES - 1}")
    return (slice_index << 24) | ((iteration & 0xFF) << 16) | (step & 0xFFFF)


def segments(length: int, segment_bytes: int) -> list[tuple[int, int]]:
    """(offset, length) of each segment of a ``length``-byte chunk."""
    return [
        (offset, min(segment_bytes, length - offset)) for offset in range(0, length, segment_bytes)
    ]


class Rank:
    """One rank (see the module's docstring)."""

    def __init__(
        self,
        plan: Plan,
        context: Context,
        *,
        iterations: int,
        compute_s: float = 0.0,
        ev_profile_id: int = 0,
        roce: RoceSettings | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        slices: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {iterations}")
        if segment_bytes < 1:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        if not 1 <= slices <= MAX_SLICES:
            raise ValueError(f"slices must be in 1..{MAX_SLICES}, got {slices}")
        self.plan = plan
        self.rank = plan.rank
        self.ctx = context
        self.iterations = iterations
        self.compute_s = compute_s
        self.ev_profile_id = ev_profile_id
        #: RC QPs with these settings; None: one MRC QP to each peer.
        self.roce = roce
        self.segment_bytes = segment_bytes
        self.slices = slices
        layout = plan.layout
        #: ``_units[b][k][j]``: slice j of step k with its stage slots in bank b.
        self._units = [
            [
                [step.in_bank(b, layout).sliced(j, slices) for j in range(slices)]
                for step in plan.steps
            ]
            for b in range(layout.stage_banks)
        ]
        #: (step, slice) -> (peer, segments it sends us then) for each receive of the unit.
        self._expected: dict[Unit, tuple[tuple[int, int], ...]] = {
            (k, j): tuple(
                (recv.peer, len(segments(recv.length, segment_bytes))) for recv in unit.recvs
            )
            for k, row in enumerate(self._units[0])
            for j, unit in enumerate(row)
        }
        self.pipeline = Pipeline(len(plan.steps), slices)
        self.clock = clock
        self.phase = Phase.READY
        self.records: list[RankIteration] = []
        self.failure: tuple[float, str] | None = None
        self.cq: CQ | None = None
        self.pd: PD | None = None
        self.mr: MR | None = None
        #: peer -> the QPs towards it
        self.qps: dict[int, tuple[QP, ...]] = {}
        self._peer_of_qp: dict[int, int] = {}
        #: By QP number: the QP, its first PSN, its WRITEs waiting for room, the receives to
        #: post again, its WRITEs in flight.
        self._qp_of_num: dict[int, QP] = {}
        self._psn: dict[int, int] = {}
        self._pending: dict[int, deque[SendWR]] = {}
        self._reposts: Counter[int] = Counter()
        self._inflight: Counter[int] = Counter()
        #: peer -> how many WRITEs went to it (which of its QPs the next one takes)
        self._turn: Counter[int] = Counter()
        self._remote: dict[int, tuple[int, int]] = {}
        self._arrived: Counter[tuple[int, int]] = Counter()
        self._outstanding = 0
        self._next_wr = 0
        self.iteration = 0
        self._compute_end = 0.0
        self._started = 0.0
        self._work = 0.0

    # --- setup ---------------------------------------------------------------------------

    @property
    def qps_per_peer(self) -> int:
        """QPs towards each peer: the RoCE settings' count, one MRC QP otherwise."""
        return 1 if self.roce is None else self.roce.qps

    @property
    def qp_numbers(self) -> list[int]:
        """Every QP's number (the numbers its agent's ``status`` lists connections by)."""
        return list(self._qp_of_num)

    def setup(self) -> RankWire:
        """CQ, region (filled with the rank's input), the QPs to each peer in INIT with
        receives posted; what the peers need to connect."""
        ctx = self.ctx
        peers = self.plan.peers
        depth = len(peers) * self.qps_per_peer * (SEND_DEPTH + RECV_DEPTH)
        self.cq = ctx.create_cq(min(1 << 16, depth))
        self.pd = ctx.alloc_pd()
        self.mr = self.pd.reg_mr(
            self.plan.layout.region_bytes, Access.LOCAL_WRITE | Access.REMOTE_WRITE
        )
        fill_input(self.mr.buf, self.plan)
        qps = {}
        for peer in peers:
            self.qps[peer] = tuple(self._make_qp(peer) for _ in range(self.qps_per_peer))
            qps[peer] = tuple((qp.qp_num, self._psn[qp.qp_num]) for qp in self.qps[peer])
        return RankWire(self.rank, tuple(ctx.device.ports), self.mr.addr, self.mr.rkey, qps)

    def _make_qp(self, peer: int) -> QP:
        """A QP towards ``peer`` in INIT, its receives posted."""
        assert self.pd is not None and self.cq is not None
        qp = self.ctx.create_qp(
            self.pd,
            self.cq,
            self.cq,
            max_send_wr=SEND_DEPTH,
            max_recv_wr=RECV_DEPTH,
            qp_type=QpType.MRC if self.roce is None else QpType.RC,
            roce_profile=None if self.roce is None else self.roce.profile,
        )
        qp.modify(QpState.INIT, ev_profile_id=self.ev_profile_id)
        qp.post_recv([RecvWR(peer) for _ in range(RECV_DEPTH)])
        self._peer_of_qp[qp.qp_num] = peer
        self._qp_of_num[qp.qp_num] = qp
        self._psn[qp.qp_num] = secrets.randbelow(1 << 24)
        self._pending[qp.qp_num] = deque()
        return qp

    def connect(self, wires: Sequence[RankWire]) -> None:
        """Every QP to RTR towards its peer's QP of the same place, then RTS (``wires[r]`` is
        rank r's)."""
        timeout = None if self.roce is None else self.roce.timeout
        for peer, own in self.qps.items():
            wire = wires[peer]
            if wire.rank != peer or self.rank not in wire.qps:
                raise ValueError(f"rank {peer}'s record has no QP towards rank {self.rank}")
            theirs = wire.qps[self.rank]
            if len(theirs) != len(own):
                raise ValueError(
                    f"rank {peer} has {len(theirs)} QP(s) towards rank {self.rank}, which has "
                    f"{len(own)} towards it"
                )
            for qp, (dest_qp, rq_psn) in zip(own, theirs, strict=True):
                qp.modify(QpState.RTR, dest_qp_num=dest_qp, rq_psn=rq_psn, dgids=list(wire.ports))
                qp.modify(QpState.RTS, sq_psn=self._psn[qp.qp_num], timeout=timeout)
            self._remote[peer] = (wire.addr, wire.rkey)

    # --- running -------------------------------------------------------------------------

    def start(self) -> None:
        """Begin the first iteration."""
        self._begin_iteration(self.clock())

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.DONE, Phase.FAILED)

    def waiting_for(self) -> str:
        """What the rank waits for, in words (for a stall's report)."""
        if self.phase is Phase.STEP:
            # Per step the slices still short of data and from whom: one line for any S.
            short: dict[int, tuple[list[int], set[int]]] = {}
            for unit in self.pipeline.waiting():
                missing = self._missing(unit)
                if missing:
                    slices, peers = short.setdefault(unit[0], ([], set()))
                    slices.append(unit[1])
                    peers.update(missing)
            waits = "; ".join(
                f"step {step}"
                + (f" slice(s) {slices}" if self.slices > 1 else "")
                + f" from rank(s) {sorted(peers)}"
                for step, (slices, peers) in sorted(short.items())
            )
            return f"rank {self.rank}, iteration {self.iteration}: waits for data: {waits}"
        if self.phase is Phase.DRAIN:
            return (
                f"rank {self.rank}, iteration {self.iteration}: waits for {self._outstanding} "
                "of its WRITEs to be acknowledged"
            )
        return f"rank {self.rank}: {self.phase.value}"

    def progress(self) -> bool:
        """Take every completion, post what can be posted, advance the state machine as far as
        it goes; whether anything happened."""
        if self.finished:
            return False
        try:
            moved = self._take_completions()
            if self.finished:
                return True
            moved |= self._advance()
            moved |= self._flush()
        except ApiError as exc:
            self._fail(f"host API: {exc}")
            return True
        return moved

    def _take_completions(self) -> bool:
        assert self.cq is not None
        moved = False
        while True:
            completions = self.cq.poll(POLL_BATCH)
            if not completions:
                break
            moved = True
            for wc in completions:
                peer = self._peer_of_qp.get(wc.qp_num)
                if wc.status is not WcStatus.SUCCESS:
                    kind = "receive" if wc.opcode is WcOpcode.RECV_RDMA_WITH_IMM else "WRITE"
                    self._fail(
                        f"{kind} on the QP to rank {peer} completed {wc.status.name}: "
                        f"{wc.vendor_err or 'no reason given'}"
                    )
                    return True
                if wc.opcode is WcOpcode.RECV_RDMA_WITH_IMM:
                    assert peer is not None and wc.imm_data is not None
                    self._arrived[(wc.imm_data, peer)] += 1
                    self._reposts[wc.qp_num] += 1
                else:
                    self._outstanding -= 1
                    if peer is not None:
                        self._inflight[wc.qp_num] -= 1
        for num, count in self._reposts.items():
            if count:
                peer = self._peer_of_qp[num]
                self._qp_of_num[num].post_recv([RecvWR(peer) for _ in range(count)])
        self._reposts.clear()
        return moved

    def _advance(self) -> bool:
        moved = False
        while True:
            now = self.clock()
            if self.phase is Phase.COMPUTE:
                if now < self._compute_end:
                    return moved
                self._start_collective(now)
                moved = True
            elif self.phase is Phase.STEP:
                for unit in self.pipeline.to_post():
                    self._post_unit(unit)
                    moved = True
                arrived = [unit for unit in self.pipeline.waiting() if self._unit_arrived(unit)]
                if not arrived:
                    return moved
                started = self.clock()
                units = self._units[self.plan.layout.bank(self.iteration)]
                for unit in arrived:
                    step, index = unit
                    for op in units[step][index].reduces:
                        assert self.mr is not None
                        apply_reduce(self.mr.buf, self.plan.layout, op)
                    self.pipeline.complete(unit)
                self._work += self.clock() - started
                moved = True
                if self.pipeline.finished:
                    self.phase = Phase.DRAIN
            elif self.phase is Phase.DRAIN:
                if self._outstanding or any(self._pending.values()):
                    return moved
                self.records.append(RankIteration(self._started, now, self._work))
                self.iteration += 1
                moved = True
                if self.iteration == self.iterations:
                    self.phase = Phase.DONE
                    return moved
                self._begin_iteration(now)
            else:
                return moved

    def _begin_iteration(self, now: float) -> None:
        if self.compute_s > 0:
            self.phase = Phase.COMPUTE
            self._compute_end = now + self.compute_s
        else:
            self._start_collective(now)

    def _start_collective(self, now: float) -> None:
        self._started = now
        self._work = 0.0
        assert self.mr is not None
        for op in self.plan.prologue:
            apply_copy(self.mr.buf, self.plan.layout, op)
        self._work += self.clock() - now
        self.pipeline.restart()
        self.phase = Phase.STEP

    def _missing(self, unit: Unit) -> list[int]:
        """The peers whose segments of ``unit`` (this iteration) have not all arrived."""
        imm = immediate(self.iteration, *unit)
        return [peer for peer, count in self._expected[unit] if self._arrived[(imm, peer)] < count]

    def _unit_arrived(self, unit: Unit) -> bool:
        """Whether every segment of ``unit`` arrived; if so its counts are consumed, so that
        nothing is left under the immediate when the iteration number wraps round to it."""
        if self._missing(unit):
            return False
        imm = immediate(self.iteration, *unit)
        for peer, _ in self._expected[unit]:
            del self._arrived[(imm, peer)]
        return True

    def _post_unit(self, unit: Unit) -> None:
        """Queue the WRITEs of slice ``unit[1]`` of step ``unit[0]``, segment by segment."""
        assert self.mr is not None
        step, index = unit
        layout = self.plan.layout
        imm = immediate(self.iteration, step, index)
        bank = self.plan.layout.bank(self.iteration)
        for send in self._units[bank][step][index].sends:
            remote_addr, rkey = self._remote[send.peer]
            local = self.mr.addr + layout.offset(send.src) + send.src_offset
            remote = remote_addr + layout.offset(send.dst) + send.dst_offset
            for offset, length in segments(send.length, self.segment_bytes):
                self._pending[self._next_qp(send.peer)].append(
                    SendWR(
                        self._next_wr,
                        [Sge(local + offset, length, self.mr.lkey)],
                        remote + offset,
                        rkey,
                        WrOpcode.RDMA_WRITE_WITH_IMM,
                        imm_data=imm,
                        send_flags=SendFlags.SIGNALED,
                    )
                )
                self._next_wr += 1

    def _next_qp(self, peer: int) -> int:
        """The QP (its number) the next WRITE to ``peer`` goes on: its QPs in turn."""
        own = self.qps[peer]
        chosen = own[self._turn[peer] % len(own)]
        self._turn[peer] += 1
        return chosen.qp_num

    def _flush(self) -> bool:
        """Post queued WRITEs as far as each QP's send queue has room."""
        moved = False
        for num, pending in self._pending.items():
            if not pending:
                continue
            qp = self._qp_of_num[num]
            # Every WRITE carries an immediate: max_wimm bounds them as the send queue does.
            room = min(
                qp.send_queue_free, (qp.max_wimm or SEND_DEPTH) - self._inflight[num], len(pending)
            )
            if room <= 0:
                continue
            batch = [pending.popleft() for _ in range(room)]
            qp.post_send(batch)
            self._outstanding += len(batch)
            self._inflight[num] += len(batch)
            moved = True
        return moved

    def _fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = (self.clock(), reason)
        self.phase = Phase.FAILED

    def abort(self, reason: str) -> None:
        """Stop the rank from outside (another rank failed, or the job stalled)."""
        if not self.finished:
            self._fail(reason)

    def verify(self) -> Verdict:
        """The rank's result against the exact expected one."""
        assert self.mr is not None
        return verify(self.mr.buf, self.plan)
