"""Who sends what to whom, step by step: the plans of the collectives, as plain data.

Every rank holds one registered region laid out the same way on every rank (``Layout``):
``IN`` (its input, never written by a peer), ``OUT`` (its result) and ``STAGE`` (one slot per
reduce-scatter step, where the left neighbour's partial sums land; two banks of them for
reduce-scatter alone, below). Because the layout is the same everywhere, a sender names a
place in its peer's region by buffer and offset, and the peer's region address turns that
into the WRITE's remote address.

A plan is, per rank, a prologue of local copies and a list of steps. A step posts its sends
(RDMA WRITE WITH IMMEDIATE into the peer's region), waits until every chunk it expects has
arrived, then applies its reductions; the next step's sends read what those produced, which is
the dependency that makes a ring as slow as its slowest hop. The collectives (NCCL's ring
algorithms; chunk ``c`` is the c-th of N equal parts of the buffer):

* reduce-scatter, N-1 steps: at step k rank r sends its partial sum of chunk (r-k-1) to rank
  r+1 and receives chunk (r-k-2) from rank r-1 into stage slot k, adding its own input; after
  the last step rank r holds chunk r summed over every rank;
* all-gather, N-1 steps: rank r starts from its own chunk r; at step k it forwards chunk
  (r-k) to rank r+1, written straight into that rank's ``OUT``, and receives chunk (r-k-1);
* all-reduce: reduce-scatter then all-gather, 2(N-1) steps;
* all-to-all, one step: rank r writes chunk j of its input into rank j's ``OUT`` at chunk r,
  for every j, all at once (no dependencies between peers, as NCCL groups them).

Reusing a buffer is safe within an iteration by the ring's causality (a chunk is overwritten
only after every rank that reads it has moved past the step that reads it) and across
iterations because a rank starts the next one only once its own WRITEs are acknowledged and
every chunk it expected has arrived (``collective.rank``). A stage slot needs one thing more:
its next write must wait for the reduction of what it holds. In all-reduce it does, since no
rank ends an iteration before every chunk has come back summed, which takes every rank's
every reduction. A reduce-scatter rank ends its iteration once its own chunk is summed, and
that chunk's way round the ring starts with its right neighbour's first send and passes no
reduction of that neighbour: so the rank may end the iteration, start the next and write into
the neighbour's stage slot while the neighbour, slow to poll, has not reduced what it holds.
So reduce-scatter's stage slots come in two banks, used by iteration parity
(``Step.in_bank``): a neighbour is never two iterations ahead (it cannot end an iteration
before this rank has started it), so a bank is written again only after this rank reduced
what it held.

Slices (NCCL's pipelining): ``Step.sliced`` cuts every op of a step to the same element range
of its chunk, so slice j of step k+1 reads only what slice j of step k wrote. The S slices of
a plan are thus S copies of the ring on disjoint bytes, each as safe as the whole one, and a
rank may run them at different steps (``collective.pipeline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

#: Bytes of one element: the collectives reduce float32.
ELEMENT_BYTES = 4
#: Most slices a ring step may be cut into: the immediate has 8 bits for the slice.
MAX_SLICES = 256


class Collective(Enum):
    """The collectives a job can run, named as on the command line."""

    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    ALLTOALL = "alltoall"

    @property
    def bus_factor_numerator(self) -> int:
        """nccl-tests' bus bandwidth factor is ``numerator x (N-1) / N``: 2 for all-reduce
        (every byte crosses the ring twice), 1 for the others."""
        return 2 if self is Collective.ALLREDUCE else 1

    def bus_factor(self, ranks: int) -> float:
        """busbw / algbw for ``ranks`` ranks: 2(N-1)/N for all-reduce, (N-1)/N otherwise."""
        return self.bus_factor_numerator * (ranks - 1) / ranks


def parse_collective(text: str) -> Collective:
    """``allreduce`` (also ``all-reduce``, ``all_reduce``) -> Collective; ValueError naming
    the choices."""
    name = text.strip().lower().replace("-", "").replace("_", "")
    try:
        return Collective(name)
    except ValueError:
        choices = ", ".join(c.value for c in Collective)
        raise ValueError(f"unknown collective {text!r}: choose {choices}") from None


class Buf(Enum):
    """The three parts of a rank's region."""

    IN = "in"
    OUT = "out"
    STAGE = "stage"


@dataclass(frozen=True)
class Layout:
    """Where each buffer lies in a rank's region, the same on every rank."""

    size: int
    ranks: int
    #: Stage slots a bank holds (one per reduce-scatter step).
    stage_slots: int
    #: Banks of stage slots, used by iteration parity where a neighbour may write the next
    #: iteration's partial sums before this rank reduced the last (module docstring).
    stage_banks: int = 1

    @property
    def chunk(self) -> int:
        """Bytes of one chunk (a rank's share of the buffer)."""
        return self.size // self.ranks

    @property
    def bank_bytes(self) -> int:
        """Bytes of one bank of stage slots."""
        return self.stage_slots * self.chunk

    def bank(self, iteration: int) -> int:
        """The stage bank ``iteration`` uses."""
        return iteration % self.stage_banks

    def offset(self, buf: Buf) -> int:
        """Where ``buf`` starts in the region."""
        return {Buf.IN: 0, Buf.OUT: self.size, Buf.STAGE: 2 * self.size}[buf]

    @property
    def region_bytes(self) -> int:
        """The region's length: input, output and the stage slots of every bank."""
        return 2 * self.size + self.stage_banks * self.bank_bytes


@dataclass(frozen=True)
class Send:
    """Write ``length`` bytes from our ``src`` at ``src_offset`` into ``peer``'s ``dst`` at
    ``dst_offset``."""

    peer: int
    src: Buf
    src_offset: int
    length: int
    dst: Buf
    dst_offset: int


@dataclass(frozen=True)
class Recv:
    """``length`` bytes that ``peer`` writes to us in this step."""

    peer: int
    length: int


@dataclass(frozen=True)
class Reduce:
    """``OUT[out_offset:+length] = IN[in_offset:+length] + STAGE[stage_offset:+length]``."""

    out_offset: int
    in_offset: int
    stage_offset: int
    length: int


@dataclass(frozen=True)
class Copy:
    """``OUT[out_offset:+length] = IN[in_offset:+length]`` (a rank's own share)."""

    out_offset: int
    in_offset: int
    length: int


def slice_range(length: int, slices: int, index: int) -> tuple[int, int]:
    """(offset, length) in bytes of slice ``index`` of ``slices`` of a ``length``-byte chunk:
    whole float32 elements, the first slices one element shorter when they do not divide
    evenly (no slice is empty while ``slices`` is at most the chunk's elements)."""
    elements = length // ELEMENT_BYTES
    start = index * elements // slices
    end = (index + 1) * elements // slices
    return start * ELEMENT_BYTES, (end - start) * ELEMENT_BYTES


@dataclass(frozen=True)
class Step:
    """Post ``sends``; once every ``recvs`` chunk arrived, apply ``reduces``."""

    sends: tuple[Send, ...]
    recvs: tuple[Recv, ...]
    reduces: tuple[Reduce, ...] = ()

    def sliced(self, index: int, slices: int) -> Step:
        """Slice ``index`` of ``slices``: every op cut to the same element range of its chunk
        (every op of a step spans a whole chunk), so that a slice's reductions touch only the
        bytes its arrivals brought and the next step's same slice sends."""
        if slices == 1:
            return self

        def cut(length: int) -> tuple[int, int]:
            return slice_range(length, slices, index)

        sends = []
        for send in self.sends:
            offset, length = cut(send.length)
            sends.append(
                Send(
                    send.peer,
                    send.src,
                    send.src_offset + offset,
                    length,
                    send.dst,
                    send.dst_offset + offset,
                )
            )
        reduces = []
        for op in self.reduces:
            offset, length = cut(op.length)
            reduces.append(
                Reduce(
                    op.out_offset + offset, op.in_offset + offset, op.stage_offset + offset, length
                )
            )
        recvs = tuple(Recv(recv.peer, cut(recv.length)[1]) for recv in self.recvs)
        return Step(tuple(sends), recvs, tuple(reduces))

    def in_bank(self, bank: int, layout: Layout) -> Step:
        """The step with its stage slots in bank ``bank``: the sends that land in a peer's
        stage and the reductions that read ours move by whole banks (the peer's layout is
        ours, and sender and receiver are in the same iteration for the same step)."""
        shift = bank * layout.bank_bytes
        if shift == 0:
            return self
        sends = tuple(
            Send(s.peer, s.src, s.src_offset, s.length, s.dst, s.dst_offset + shift)
            if s.dst is Buf.STAGE
            else s
            for s in self.sends
        )
        reduces = tuple(
            Reduce(op.out_offset, op.in_offset, op.stage_offset + shift, op.length)
            for op in self.reduces
        )
        return Step(sends, self.recvs, reduces)


@dataclass(frozen=True)
class Plan:
    """One rank's part of a collective."""

    collective: Collective
    rank: int
    layout: Layout
    prologue: tuple[Copy, ...]
    steps: tuple[Step, ...]

    @property
    def peers(self) -> tuple[int, ...]:
        """The ranks this rank exchanges data with (it needs a QP to each), in order."""
        seen: dict[int, None] = {}
        for step in self.steps:
            for send in step.sends:
                seen[send.peer] = None
            for recv in step.recvs:
                seen[recv.peer] = None
        return tuple(seen)

    @property
    def bytes_sent(self) -> int:
        """Payload bytes this rank sends in one iteration."""
        return sum(send.length for step in self.steps for send in step.sends)


def check_size(size: int, ranks: int) -> None:
    """ValueError unless ``size`` splits into ``ranks`` equal chunks of whole float32s."""
    if ranks < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {ranks}")
    if size <= 0 or size % (ELEMENT_BYTES * ranks):
        raise ValueError(
            f"size {size} must be a positive multiple of {ELEMENT_BYTES} x {ranks} ranks "
            f"= {ELEMENT_BYTES * ranks} bytes (equal float32 chunks)"
        )


def check_slices(size: int, ranks: int, slices: int) -> None:
    """ValueError unless each chunk of ``size`` over ``ranks`` cuts into ``slices`` non-empty
    slices of whole float32s, and the immediate has room for the slice's number."""
    elements = size // ranks // ELEMENT_BYTES
    most = min(MAX_SLICES, elements)
    if not 1 <= slices <= most:
        raise ValueError(
            f"slices must be in 1..{most} ({elements} float32s a chunk, at most {MAX_SLICES}), "
            f"got {slices}"
        )


def round_size(size: int, ranks: int) -> int:
    """The largest size at most ``size`` that :func:`check_size` accepts (at least one
    element per rank)."""
    unit = ELEMENT_BYTES * ranks
    return max(unit, size - size % unit)


def make_plan(collective: Collective, rank: int, ranks: int, size: int) -> Plan:
    """Rank ``rank``'s plan of ``collective`` over ``ranks`` ranks on ``size`` bytes."""
    check_size(size, ranks)
    if not 0 <= rank < ranks:
        raise ValueError(f"rank {rank} is outside 0..{ranks - 1}")
    if collective is Collective.ALLTOALL:
        return _alltoall(rank, ranks, size)
    reduce_scatter = collective in (Collective.ALLREDUCE, Collective.REDUCESCATTER)
    gather = collective in (Collective.ALLREDUCE, Collective.ALLGATHER)
    # Reduce-scatter alone alternates two banks of stage slots (module docstring); all-reduce
    # needs one, since its iteration ends only after every rank reduced every slot.
    banks = 2 if collective is Collective.REDUCESCATTER else 1
    layout = Layout(size, ranks, ranks - 1 if reduce_scatter else 0, banks)
    chunk = layout.chunk
    right, left = (rank + 1) % ranks, (rank - 1) % ranks
    steps: list[Step] = []
    prologue: tuple[Copy, ...] = ()
    if reduce_scatter:
        for k in range(ranks - 1):
            sent = (rank - k - 1) % ranks
            got = (rank - k - 2) % ranks
            # Step 0 sends our own input; later steps the partial sum the last step made.
            src = Buf.IN if k == 0 else Buf.OUT
            steps.append(
                Step(
                    sends=(Send(right, src, sent * chunk, chunk, Buf.STAGE, k * chunk),),
                    recvs=(Recv(left, chunk),),
                    reduces=(Reduce(got * chunk, got * chunk, k * chunk, chunk),),
                )
            )
    else:
        prologue = (Copy(rank * chunk, rank * chunk, chunk),)
    if gather:
        # Reduce-scatter left us chunk r (all-reduce), or the prologue copied it (all-gather).
        for k in range(ranks - 1):
            sent = (rank - k) % ranks
            steps.append(
                Step(
                    sends=(Send(right, Buf.OUT, sent * chunk, chunk, Buf.OUT, sent * chunk),),
                    recvs=(Recv(left, chunk),),
                )
            )
    return Plan(collective, rank, layout, prologue, tuple(steps))


def _alltoall(rank: int, ranks: int, size: int) -> Plan:
    layout = Layout(size, ranks, 0)
    chunk = layout.chunk
    # Peers in ring order from our right, so that each rank's first WRITE goes elsewhere.
    peers = [(rank + k) % ranks for k in range(1, ranks)]
    sends = tuple(Send(j, Buf.IN, j * chunk, chunk, Buf.OUT, rank * chunk) for j in peers)
    recvs = tuple(Recv((rank - k) % ranks, chunk) for k in range(1, ranks))
    return Plan(
        Collective.ALLTOALL,
        rank,
        layout,
        (Copy(rank * chunk, rank * chunk, chunk),),
        (Step(sends, recvs),),
    )
