"""Ranks with sliced steps over a network the test schedules (``fabric``), as a specification:

* one slice posts exactly the WRITEs, in the order and with the immediates, that a rank
  posted before steps had slices (but for reduce-scatter's stage writes, which alternate two
  banks by iteration);
* with S slices, a rank posts slice 0 of step k+1 once slice 0 of step k is in, before the
  rest of step k has arrived; slices that arrive in any order move on in that order;
* a neighbour a whole iteration ahead is no problem: its segments are counted until the rank
  gets there;
* every collective ends exact for several S whatever the order of arrivals and
  acknowledgements (oldest first, newest first, random, with retransmissions that land twice,
  with a rank slow to poll), and no WRITE ever lands on a stage slot whose previous content
  is not reduced yet;
* the checks are not vacuous: a pipeline that ignores the dependency ends wrong, and with one
  bank of stage slots a slow reduce-scatter rank has a slot overwritten before it reduced it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import pytest

from collective.data import verify
from collective.pipeline import Pipeline, Unit
from collective.plans import Buf, Collective, make_plan
from collective.rank import Phase, Rank, immediate, segments
from tests.unit.collective.fabric import (
    Fabric,
    Pick,
    Posted,
    any_write,
    connect,
    newest,
    oldest,
    run,
)

#: Small enough to run many schedules, large enough for several segments a slice.
ELEMENTS_PER_CHUNK = 20
SEGMENT = 16


def ranks_on(
    fabric: Fabric,
    collective: Collective,
    slices: int,
    iterations: int = 2,
    segment: int = SEGMENT,
    banks: int | None = None,
) -> list[Rank]:
    """A rank on each of the fabric's contexts, connected (``banks``: force the plans' stage
    banks, to show what one bank would do)."""
    size = 4 * ELEMENTS_PER_CHUNK * fabric.ranks
    plans = [make_plan(collective, r, fabric.ranks, size) for r in range(fabric.ranks)]
    if banks is not None:
        plans = [
            dataclasses.replace(p, layout=dataclasses.replace(p.layout, stage_banks=banks))
            for p in plans
        ]
    members = [
        Rank(
            plan,
            fabric.contexts[plan.rank],  # type: ignore[arg-type]
            iterations=iterations,
            segment_bytes=segment,
            slices=slices,
        )
        for plan in plans
    ]
    connect(fabric, members)
    return members


def decode(imm: int) -> tuple[int, int, int]:
    """(iteration mod 256, step, slice) of an immediate: bits 23-16, 15-0, 31-24."""
    return (imm >> 16) & 0xFF, imm & 0xFFFF, imm >> 24


def position(member: Rank, index: int) -> tuple[int, int]:
    """(iteration, step) slice ``index`` of ``member`` is at: it has reduced every earlier
    unit of that slice and none later."""
    if member.phase is Phase.STEP:
        return member.iteration, member.pipeline.at(index)
    if member.phase is Phase.DRAIN:
        return member.iteration, len(member.plan.steps)
    if member.phase is Phase.DONE:
        return member.iterations, 0
    return member.iteration, 0


def stage_guard(members: list[Rank]) -> Callable[[Posted, bool], None]:
    """A WRITE landing in a stage slot must find what the slot held reduced (the receiver
    completed the unit that brought it), and must not come after its own unit was reduced.
    Retransmissions that land again are left to the exactness check."""
    #: (rank, region offset) -> (iteration, step, slice) of the WRITE that last landed there
    held: dict[tuple[int, int], tuple[int, int, int]] = {}

    def check(posted: Posted, rewrite: bool) -> None:
        member = members[posted.dst_rank]
        if rewrite or posted.remote_offset < member.plan.layout.offset(Buf.STAGE):
            return
        iteration, step, index = decode(posted.imm)
        assert position(member, index) <= (iteration, step), "lands after it was reduced"
        where = (posted.dst_rank, posted.remote_offset)
        if where in held:
            before, before_step, before_index = held[where]
            at = position(member, before_index)
            assert at > (before, before_step), (
                f"rank {posted.dst_rank} slice {before_index} at {at}: iteration {iteration} "
                f"step {step} overwrites the stage slot iteration {before} step {before_step} "
                "filled, not yet reduced"
            )
        held[where] = (iteration, step, index)

    return check


def deliver_where(fabric: Fabric, wanted: Callable[[Posted], bool]) -> int:
    """Deliver every in-flight WRITE ``wanted`` picks, oldest first; how many."""
    chosen = [write for write in fabric.in_flight if wanted(write.posted)]
    for write in chosen:
        fabric.deliver(write)
    return len(chosen)


def turn(members: list[Rank]) -> None:
    for member in members:
        member.progress()


def posted_units(fabric: Fabric, rank: int) -> list[tuple[int, int, int]]:
    """(iteration, step, slice) of each WRITE ``rank`` posted, first segment only."""
    seen: dict[tuple[int, int, int], None] = {}
    for posted in fabric.posts[rank]:
        seen[decode(posted.imm)] = None
    return list(seen)


@pytest.mark.parametrize("collective", list(Collective))
def test_one_slice_posts_exactly_what_a_rank_posted_before_slices(collective):
    fabric = Fabric(3)
    members = ranks_on(fabric, collective, slices=1, iterations=2)
    run(fabric, members, any_write, seed=1)
    for member in members:
        plan, layout = member.plan, member.plan.layout
        # Before slices: step by step, each send cut into segments, immediate (iteration, step);
        # reduce-scatter's stage writes now alternate banks by iteration.
        before = [
            Posted(
                plan.rank,
                send.peer,
                layout.offset(send.src) + send.src_offset + offset,
                layout.offset(send.dst)
                + send.dst_offset
                + offset
                + (layout.bank(iteration) * layout.bank_bytes if send.dst is Buf.STAGE else 0),
                length,
                (iteration << 16) | k,
            )
            for iteration in range(2)
            for k, step in enumerate(plan.steps)
            for send in step.sends
            for offset, length in segments(send.length, SEGMENT)
        ]
        assert fabric.posts[plan.rank] == before
        assert verify(member.mr.buf, plan).ok


def test_slice_0_of_the_next_step_goes_before_the_last_slice_of_this_one_arrived():
    fabric = Fabric(3)
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=4)
    for member in members:
        member.start()
    turn(members)
    assert deliver_where(fabric, lambda p: p.dst_rank == 1 and p.imm == immediate(0, 0, 0))
    turn(members)
    assert posted_units(fabric, 1) == [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 1, 0)]
    assert any(
        w.posted.dst_rank == 1 and w.posted.imm == immediate(0, 0, 3) for w in fabric.in_flight
    ), "step 0's last slice has not arrived"


def test_without_slices_the_next_step_waits_for_the_whole_chunk():
    fabric = Fabric(3)
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=1)
    for member in members:
        member.start()
    turn(members)
    into_1 = [w for w in fabric.in_flight if w.posted.dst_rank == 1]
    assert len(into_1) == len(segments(4 * ELEMENTS_PER_CHUNK, SEGMENT)) > 1
    for write in into_1[:-1]:
        fabric.deliver(write)
    turn(members)
    assert posted_units(fabric, 1) == [(0, 0, 0)]
    fabric.deliver(into_1[-1])
    turn(members)
    assert posted_units(fabric, 1) == [(0, 0, 0), (0, 1, 0)]


def test_slices_that_arrive_in_any_order_move_on_in_that_order():
    fabric = Fabric(3, guard=None)
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=4)
    fabric.guard = stage_guard(members)
    for member in members:
        member.start()
    turn(members)
    for index in (3, 1, 0, 2):
        # the slice's segments newest first, too
        chosen = [
            w
            for w in fabric.in_flight
            if w.posted.dst_rank == 1 and w.posted.imm == immediate(0, 0, index)
        ]
        for write in reversed(chosen):
            fabric.deliver(write)
        turn(members)
    step_1 = [unit for unit in posted_units(fabric, 1) if unit[1] == 1]
    assert step_1 == [(0, 1, 3), (0, 1, 1), (0, 1, 0), (0, 1, 2)]
    run(fabric, members, oldest)
    assert all(verify(m.mr.buf, m.plan).ok for m in members)


@pytest.mark.parametrize("collective", [Collective.ALLTOALL, Collective.ALLGATHER])
def test_a_neighbour_a_whole_iteration_ahead_is_counted_until_the_rank_gets_there(collective):
    fabric = Fabric(2)
    members = ranks_on(fabric, collective, slices=2, iterations=2)
    fabric.guard = stage_guard(members)
    for member in members:
        member.start()
    # Everything of iteration 0 arrives; only rank 0's WRITEs are acknowledged.
    turn(members)
    while deliver_where(fabric, lambda _p: True):
        turn(members)
    for write in [w for w in fabric.unacked if w.posted.src_rank == 0]:
        fabric.ack(write)
    turn(members)
    assert (members[0].iteration, members[1].iteration) == (1, 0)
    assert members[1].phase is Phase.DRAIN
    # Rank 0's iteration 1 reaches rank 1 while it still drains iteration 0, last slice first.
    ahead = [w for w in fabric.in_flight if w.posted.dst_rank == 1]
    assert ahead and all(decode(w.posted.imm)[0] == 1 for w in ahead)
    for write in reversed(ahead):
        fabric.deliver(write)
    turn(members)
    assert members[1].phase is Phase.DRAIN and members[1].iteration == 0
    run(fabric, members, oldest)
    assert all(verify(m.mr.buf, m.plan).ok for m in members)
    assert all(not m._arrived for m in members), "every counted segment was consumed"


#: How a run orders arrivals, and which rank sits most of its turns out.
SCHEDULES: dict[str, tuple[Pick, Mapping[int, float]]] = {
    "oldest": (oldest, {}),
    "newest": (newest, {}),
    "random": (any_write, {}),
    "slow rank": (any_write, {1: 0.95}),
}


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("slices", [1, 2, 3, 5])
@pytest.mark.parametrize("collective", list(Collective))
def test_every_collective_ends_exact_whatever_the_order_of_arrivals(
    collective: Collective, slices: int, schedule: str
):
    pick, slow = SCHEDULES[schedule]
    fabric = Fabric(4)
    members = ranks_on(fabric, collective, slices, iterations=3)
    fabric.guard = stage_guard(members)
    run(fabric, members, pick, seed=slices, rewrite_share=0.2, slow=slow)
    for member in members:
        verdict = verify(member.mr.buf, member.plan)
        assert verdict.ok, verdict.describe()
        assert len(member.records) == 3


@pytest.mark.parametrize("ranks", [2, 7])
def test_rings_of_other_sizes_with_uneven_slices_end_exact(ranks):
    fabric = Fabric(ranks)
    # 20 elements a chunk in 6 slices: slices of 3 and 4 elements
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=6, iterations=2, segment=8)
    fabric.guard = stage_guard(members)
    run(fabric, members, any_write, seed=ranks, rewrite_share=0.2)
    assert all(verify(m.mr.buf, m.plan).ok for m in members)


def test_each_slice_carries_its_share_and_the_rank_sends_what_it_sent_unsliced():
    fabric = Fabric(4)
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=3, iterations=1)
    run(fabric, members, any_write)
    for member in members:
        sent = fabric.posts[member.rank]
        assert sum(p.length for p in sent) == member.plan.bytes_sent
        units = {decode(p.imm) for p in sent}
        assert units == {(0, k, j) for k in range(len(member.plan.steps)) for j in range(3)}


def test_a_stalled_rank_says_which_slices_of_which_step_it_waits_for():
    fabric = Fabric(3)
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=4)
    for member in members:
        member.start()
    turn(members)
    deliver_where(fabric, lambda p: p.dst_rank == 1 and p.imm == immediate(0, 0, 2))
    turn(members)
    assert members[1].waiting_for() == (
        "rank 1, iteration 0: waits for data: step 0 slice(s) [0, 1, 3] from rank(s) [0]; "
        "step 1 slice(s) [2] from rank(s) [0]"
    )


class Eager(Pipeline):
    """A pipeline that offers every unit of the iteration at once: no dependencies."""

    def __init__(self, steps: int, slices: int) -> None:
        super().__init__(steps, slices)
        self.offered = False

    def restart(self) -> None:
        super().restart()
        self.offered = False

    def to_post(self) -> list[Unit]:
        if self.offered:
            return []
        self.offered = True
        self._posted = [True] * self.slices
        return [(k, j) for k in range(self.steps) for j in range(self.slices)]

    def complete(self, unit: Unit) -> None:
        super().complete(unit)
        self._posted[unit[1]] = True


def test_a_pipeline_that_ignores_the_dependency_ends_wrong():
    fabric = Fabric(4)
    members = ranks_on(fabric, Collective.ALLREDUCE, slices=2)
    for member in members:
        member.pipeline = Eager(member.pipeline.steps, member.pipeline.slices)
    run(fabric, members, oldest)
    assert not any(verify(m.mr.buf, m.plan).ok for m in members)


@pytest.mark.parametrize("slices", [1, 3])
def test_with_one_bank_a_slow_reduce_scatter_rank_has_a_slot_overwritten_unreduced(slices):
    """Why reduce-scatter has two banks: its left neighbour may end an iteration (its own chunk
    summed needs only this rank's first send) and write the next one's partial sums while
    this rank has not polled the last ones yet. Over a few schedules, one bank trips the
    stage check; two (the plan's) never do (``test_every_collective_ends_exact...``)."""
    tripped = 0
    for seed in range(40):
        fabric = Fabric(4)
        members = ranks_on(fabric, Collective.REDUCESCATTER, slices, iterations=3, banks=1)
        fabric.guard = stage_guard(members)
        try:
            run(fabric, members, any_write, seed=seed, slow={1: 0.99})
        except AssertionError as error:
            assert "overwrites the stage slot" in str(error)
            tripped += 1
    assert tripped


def test_reduce_scatter_alone_has_two_banks_of_stage_slots():
    assert make_plan(Collective.REDUCESCATTER, 0, 4, 64).layout.stage_banks == 2
    assert make_plan(Collective.ALLREDUCE, 0, 4, 64).layout.stage_banks == 1
