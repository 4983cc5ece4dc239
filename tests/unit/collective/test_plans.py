"""The collectives' plans as a specification: run every rank's plan on plain buffers, with
the network replaced by copies between them, and the results are exact; every send meets a
receive of the same length in the same step; each rank sends what nccl-tests' bus factor
says the links carry; a step's slices are the step cut into disjoint element ranges, so that
each slice of the ring is a ring of its own; reduce-scatter's stage slots come in two banks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collective.data import apply_copy, apply_reduce, fill_input, verify
from collective.plans import (
    ELEMENT_BYTES,
    MAX_SLICES,
    Buf,
    Collective,
    Step,
    check_size,
    check_slices,
    make_plan,
    parse_collective,
    round_size,
    slice_range,
)


def run_plans(collective: Collective, ranks: int, size: int) -> list[memoryview]:
    """Every rank's plan in lockstep: all sends of a step land, then every rank reduces."""
    plans = [make_plan(collective, r, ranks, size) for r in range(ranks)]
    regions = [memoryview(bytearray(plan.layout.region_bytes)) for plan in plans]
    for plan, region in zip(plans, regions, strict=True):
        fill_input(region, plan)
        for op in plan.prologue:
            apply_copy(region, plan.layout, op)
    layout = plans[0].layout
    for index in range(len(plans[0].steps)):
        landed = []
        for plan, region in zip(plans, regions, strict=True):
            for send in plan.steps[index].sends:
                start = layout.offset(send.src) + send.src_offset
                landed.append((send, bytes(region[start : start + send.length])))
        for send, data in landed:
            start = layout.offset(send.dst) + send.dst_offset
            regions[send.peer][start : start + len(data)] = data
        for plan, region in zip(plans, regions, strict=True):
            for op in plan.steps[index].reduces:
                apply_reduce(region, layout, op)
    return regions


@pytest.mark.parametrize("collective", list(Collective))
@pytest.mark.parametrize("ranks", [2, 3, 4, 7, 16])
def test_every_rank_ends_with_the_exact_result(collective, ranks):
    size = 4 * ranks * 5
    regions = run_plans(collective, ranks, size)
    for rank, region in enumerate(regions):
        verdict = verify(region, make_plan(collective, rank, ranks, size))
        assert verdict.ok, verdict.describe()


@pytest.mark.parametrize("collective", list(Collective))
def test_a_step_that_is_skipped_leaves_a_wrong_result(collective):
    ranks, size = 4, 4 * 4 * 3
    plans = [make_plan(collective, r, ranks, size) for r in range(ranks)]
    regions = [memoryview(bytearray(p.layout.region_bytes)) for p in plans]
    for plan, region in zip(plans, regions, strict=True):
        fill_input(region, plan)
    # no step runs at all: nobody may pass verification
    assert not any(verify(r, p).ok for r, p in zip(regions, plans, strict=True))


@pytest.mark.parametrize("collective", list(Collective))
def test_sends_and_receives_pair_up_step_by_step(collective):
    ranks, size = 5, 4 * 5 * 8
    plans = [make_plan(collective, r, ranks, size) for r in range(ranks)]
    assert len({len(p.steps) for p in plans}) == 1
    for index in range(len(plans[0].steps)):
        sent = sorted((p.rank, s.peer, s.length) for p in plans for s in p.steps[index].sends)
        received = sorted((r.peer, p.rank, r.length) for p in plans for r in p.steps[index].recvs)
        assert sent == received


def test_step_counts_are_nccls_ring_counts():
    assert len(make_plan(Collective.ALLREDUCE, 0, 8, 4 * 8).steps) == 14  # 2(N-1)
    assert len(make_plan(Collective.ALLGATHER, 0, 8, 4 * 8).steps) == 7
    assert len(make_plan(Collective.REDUCESCATTER, 0, 8, 4 * 8).steps) == 7
    assert len(make_plan(Collective.ALLTOALL, 0, 8, 4 * 8).steps) == 1


@pytest.mark.parametrize("collective", list(Collective))
def test_each_rank_sends_the_bus_factor_times_the_size(collective):
    ranks, size = 8, 4 * 8 * 16
    plan = make_plan(collective, 3, ranks, size)
    assert plan.bytes_sent == pytest.approx(collective.bus_factor(ranks) * size)


def test_bus_factors_are_nccl_tests():
    assert Collective.ALLREDUCE.bus_factor(4) == 1.5
    for collective in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL):
        assert collective.bus_factor(4) == 0.75


def test_ring_neighbours_and_all_to_all_peers():
    assert make_plan(Collective.ALLREDUCE, 0, 4, 64).peers == (1, 3)
    assert make_plan(Collective.ALLTOALL, 1, 4, 64).peers == (2, 3, 0)


def test_no_peer_writes_into_a_ranks_input():
    for collective in Collective:
        for rank in range(4):
            for step in make_plan(collective, rank, 4, 64).steps:
                assert all(send.dst is not Buf.IN for send in step.sends)


def test_sizes_must_split_into_equal_float_chunks():
    check_size(4 * 3 * 10, 3)
    for size, ranks in ((10, 3), (0, 2), (4 * 3 * 10, 1)):
        with pytest.raises(ValueError):
            check_size(size, ranks)
    assert round_size(16 << 20, 3) == (16 << 20) - (16 << 20) % 12
    assert round_size(5, 4) == 16
    with pytest.raises(ValueError, match="outside"):
        make_plan(Collective.ALLREDUCE, 4, 4, 64)


def test_collective_names():
    assert parse_collective("all-reduce") is Collective.ALLREDUCE
    assert parse_collective("AllToAll") is Collective.ALLTOALL
    with pytest.raises(ValueError, match="allreduce, allgather"):
        parse_collective("broadcast")


def test_stage_slots_only_where_something_is_reduced():
    assert make_plan(Collective.ALLGATHER, 0, 4, 64).layout.stage_slots == 0
    layout = make_plan(Collective.ALLREDUCE, 0, 4, 64).layout
    assert layout.region_bytes == 2 * 64 + 3 * 16
    # reduce-scatter alone: two banks, by iteration parity
    layout = make_plan(Collective.REDUCESCATTER, 0, 4, 64).layout
    assert layout.region_bytes == 2 * 64 + 2 * 3 * 16
    assert [layout.bank(i) for i in range(4)] == [0, 1, 0, 1]


def test_a_steps_bank_moves_only_its_stage_writes_and_reads():
    plan = make_plan(Collective.REDUCESCATTER, 1, 4, 64)
    step, layout = plan.steps[2], plan.layout
    assert step.in_bank(0, layout) is step
    moved = step.in_bank(1, layout)
    assert [s.dst_offset - t.dst_offset for s, t in zip(moved.sends, step.sends, strict=True)] == [
        layout.bank_bytes
    ]
    assert [
        (m.stage_offset - r.stage_offset, m.in_offset, m.out_offset)
        for m, r in zip(moved.reduces, step.reduces, strict=True)
    ] == [(layout.bank_bytes, r.in_offset, r.out_offset) for r in step.reduces]
    assert [s.src_offset for s in moved.sends] == [s.src_offset for s in step.sends]
    gather = make_plan(Collective.ALLREDUCE, 1, 4, 64).steps[-1]
    assert gather.in_bank(1, layout).sends == gather.sends, "OUT writes stay where they are"
    assert np.dtype(np.float32).itemsize == 4


@pytest.mark.parametrize(("length", "slices"), [(80, 1), (80, 4), (80, 3), (80, 20), (12, 2)])
def test_slices_cut_a_chunk_into_whole_non_empty_elements_in_order(length, slices):
    ranges = [slice_range(length, slices, j) for j in range(slices)]
    assert ranges[0][0] == 0
    for (offset, size), (following, _) in itertools.pairwise(ranges):
        assert offset + size == following, "contiguous, in order"
    assert sum(size for _, size in ranges) == length
    assert all(size > 0 and size % ELEMENT_BYTES == 0 for _, size in ranges)
    sizes = {size for _, size in ranges}
    assert max(sizes) - min(sizes) <= ELEMENT_BYTES, "as even as whole elements allow"


def _touched(step: Step, layout) -> dict[str, set[int]]:
    """The bytes of the region a step's ops read or write, by role."""

    def span(buf: Buf, offset: int, length: int) -> set[int]:
        start = layout.offset(buf) + offset
        return set(range(start, start + length))

    touched: dict[str, set[int]] = {"sent": set(), "written": set(), "reduced": set()}
    for send in step.sends:
        touched["sent"] |= span(send.src, send.src_offset, send.length)
        touched["written"] |= span(send.dst, send.dst_offset, send.length)
    for op in step.reduces:
        touched["reduced"] |= span(Buf.OUT, op.out_offset, op.length)
        touched["reduced"] |= span(Buf.IN, op.in_offset, op.length)
        touched["reduced"] |= span(Buf.STAGE, op.stage_offset, op.length)
    return touched


@pytest.mark.parametrize("slices", [2, 3, 7])
@pytest.mark.parametrize("collective", list(Collective))
def test_a_steps_slices_are_the_step_cut_into_disjoint_ranges(collective, slices):
    ranks, size = 4, 4 * 4 * 7
    plan = make_plan(collective, 1, ranks, size)
    for step in plan.steps:
        parts = [step.sliced(j, slices) for j in range(slices)]
        whole = _touched(step, plan.layout)
        cut = [_touched(part, plan.layout) for part in parts]
        for role, covered in whole.items():
            assert set().union(*(c[role] for c in cut)) == covered, role
        for a in range(slices):
            for b in range(a + 1, slices):
                every_a = set().union(*cut[a].values())
                every_b = set().union(*cut[b].values())
                assert not every_a & every_b, f"slices {a} and {b} share bytes"
        for recv in step.recvs:
            got = [r.length for part in parts for r in part.recvs if r.peer == recv.peer]
            assert sum(got) == recv.length and len(got) == slices
    assert plan.steps[0].sliced(0, 1) is plan.steps[0], "one slice is the step itself"


def test_slices_must_fit_the_chunk_and_the_immediate():
    check_slices(4 * 4 * 7, 4, 7)
    check_slices(4 * 2 * 1000, 2, MAX_SLICES)
    for size, ranks, slices in ((4 * 4 * 7, 4, 8), (4 * 4 * 7, 4, 0), (4 * 2 * 1000, 2, 257)):
        with pytest.raises(ValueError, match="slices must be in"):
            check_slices(size, ranks, slices)
