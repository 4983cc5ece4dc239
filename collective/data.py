"""What the ranks' buffers hold: inputs, the local arithmetic, and the exact expected result.

Every input element is a small integer stored as float32 (``value(rank, i)`` below 1021), so
any sum over up to 2^14 ranks is an integer below 2^24, which float32 holds exactly: the ring
adds the ranks' contributions in a different order for every chunk, and the result is still
exact, so a job can compare every byte of every rank's output with what it must be. A byte
placed wrong, a chunk reduced twice or one missed shows up as a wrong element.

numpy does the arithmetic and the comparison (a dependency of matplotlib, which the project
already needs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from collective.plans import ELEMENT_BYTES, Buf, Collective, Copy, Layout, Plan, Reduce

_MODULUS = 1021
_RANK_FACTOR = 7919
_INDEX_FACTOR = 31


def values(rank: int, start: int, count: int) -> np.ndarray:
    """Rank ``rank``'s input elements ``start .. start + count`` (float32)."""
    index = np.arange(start, start + count, dtype=np.int64)
    return ((rank * _RANK_FACTOR + index * _INDEX_FACTOR) % _MODULUS).astype(np.float32)


def floats(buffer: memoryview, layout: Layout, buf: Buf, offset: int, length: int) -> np.ndarray:
    """A float32 view (no copy) of ``length`` bytes of ``buf`` at ``offset`` in a region."""
    start = layout.offset(buf) + offset
    return np.frombuffer(buffer, dtype=np.float32, count=length // ELEMENT_BYTES, offset=start)


def fill_input(buffer: memoryview, plan: Plan) -> None:
    """Write the rank's input into ``IN`` and clear ``OUT`` (all-gather's input is its own
    chunk only; the rest of ``IN`` stays zero and is never sent)."""
    layout = plan.layout
    elements = layout.size // ELEMENT_BYTES
    out = floats(buffer, layout, Buf.OUT, 0, layout.size)
    out[:] = 0
    target = floats(buffer, layout, Buf.IN, 0, layout.size)
    if plan.collective is Collective.ALLGATHER:
        target[:] = 0
        per = layout.chunk // ELEMENT_BYTES
        target[plan.rank * per : (plan.rank + 1) * per] = values(plan.rank, plan.rank * per, per)
    else:
        target[:] = values(plan.rank, 0, elements)


def apply_reduce(buffer: memoryview, layout: Layout, op: Reduce) -> None:
    """``OUT = IN + STAGE`` over the op's range."""
    np.add(
        floats(buffer, layout, Buf.IN, op.in_offset, op.length),
        floats(buffer, layout, Buf.STAGE, op.stage_offset, op.length),
        out=floats(buffer, layout, Buf.OUT, op.out_offset, op.length),
    )


def apply_copy(buffer: memoryview, layout: Layout, op: Copy) -> None:
    """``OUT = IN`` over the op's range."""
    floats(buffer, layout, Buf.OUT, op.out_offset, op.length)[:] = floats(
        buffer, layout, Buf.IN, op.in_offset, op.length
    )


def expected(plan: Plan) -> tuple[int, np.ndarray]:
    """Where the rank's result lies in ``OUT`` (offset in bytes) and what it must be."""
    layout = plan.layout
    ranks, rank = layout.ranks, plan.rank
    per = layout.chunk // ELEMENT_BYTES
    elements = layout.size // ELEMENT_BYTES
    if plan.collective is Collective.ALLREDUCE:
        return 0, _sum_over_ranks(ranks, 0, elements)
    if plan.collective is Collective.REDUCESCATTER:
        return rank * layout.chunk, _sum_over_ranks(ranks, rank * per, per)
    if plan.collective is Collective.ALLGATHER:
        return 0, np.concatenate([values(j, j * per, per) for j in range(ranks)])
    # all-to-all: chunk j of our output is chunk ``rank`` of rank j's input
    return 0, np.concatenate([values(j, rank * per, per) for j in range(ranks)])


def _sum_over_ranks(ranks: int, start: int, count: int) -> np.ndarray:
    total = np.zeros(count, dtype=np.float64)
    for rank in range(ranks):
        total += values(rank, start, count)
    return total.astype(np.float32)


@dataclass(frozen=True)
class Verdict:
    """A rank's result against the expected one: how many elements differ, and the first."""

    rank: int
    elements: int
    wrong: int
    first_wrong: int | None
    got: float | None
    want: float | None

    @property
    def ok(self) -> bool:
        return self.wrong == 0

    def describe(self) -> str:
        """One line for a report."""
        if self.ok:
            return f"rank {self.rank}: all {self.elements} elements exact"
        return (
            f"rank {self.rank}: {self.wrong} of {self.elements} elements wrong, first at "
            f"element {self.first_wrong}: {self.got!r} instead of {self.want!r}"
        )


def verify(buffer: memoryview, plan: Plan) -> Verdict:
    """Compare the rank's result, bit for bit, with the exact expected value."""
    offset, want = expected(plan)
    got = floats(buffer, plan.layout, Buf.OUT, offset, want.size * ELEMENT_BYTES)
    # Bit patterns, not float equality: -0.0 or a NaN where a number belongs is wrong too.
    mismatch = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    if mismatch.size == 0:
        return Verdict(plan.rank, int(want.size), 0, None, None, None)
    first = int(mismatch[0])
    return Verdict(
        plan.rank, int(want.size), int(mismatch.size), first, float(got[first]), float(want[first])
    )
