"""The pipeline's order as a specification: with one slice, a step is posted only once the
step before it completed; with S slices, slice j of step k+1 is offered as soon as slice j of
step k completed, before the other slices of step k have; slices complete in any order; a unit
completes once, in its slice's order; an iteration ends when every slice is through."""

from __future__ import annotations

import pytest

from collective.pipeline import Pipeline


def test_one_slice_is_step_after_step():
    pipeline = Pipeline(steps=3, slices=1)
    order = []
    while not pipeline.finished:
        posted = pipeline.to_post()
        assert posted and pipeline.to_post() == [], "a unit is offered once"
        order += posted
        (unit,) = pipeline.waiting()
        pipeline.complete(unit)
    assert order == [(0, 0), (1, 0), (2, 0)]
    assert pipeline.to_post() == [] and pipeline.waiting() == []


def test_every_slice_of_the_first_step_goes_at_once_in_slice_order():
    pipeline = Pipeline(steps=3, slices=4)
    assert pipeline.to_post() == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert pipeline.waiting() == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_the_next_steps_first_slice_goes_before_this_steps_last_slice_completed():
    pipeline = Pipeline(steps=3, slices=4)
    pipeline.to_post()
    pipeline.complete((0, 0))
    assert pipeline.to_post() == [(1, 0)]
    assert (0, 3) in pipeline.waiting(), "step 0's last slice is still awaited"
    pipeline.complete((1, 0))
    assert pipeline.to_post() == [(2, 0)], "slice 0 may run two steps ahead of slice 3"


def test_slices_complete_in_any_order_and_each_moves_on_alone():
    pipeline = Pipeline(steps=2, slices=3)
    pipeline.to_post()
    pipeline.complete((0, 2))
    pipeline.complete((0, 0))
    assert pipeline.to_post() == [(1, 0), (1, 2)]
    assert pipeline.waiting() == [(1, 0), (0, 1), (1, 2)]
    assert [pipeline.at(j) for j in range(3)] == [1, 0, 1]


@pytest.mark.parametrize(
    "unit",
    [(0, 0), (1, 1), (0, 5)],
    ids=["completed twice", "a step ahead of its slice", "no such slice"],
)
def test_a_unit_that_is_not_awaited_cannot_complete(unit):
    pipeline = Pipeline(steps=2, slices=2)
    pipeline.to_post()
    pipeline.complete((0, 0))
    with pytest.raises(ValueError, match="not awaited"):
        pipeline.complete(unit)


def test_a_unit_cannot_complete_before_its_sends_were_offered():
    pipeline = Pipeline(steps=2, slices=1)
    with pytest.raises(ValueError, match="not awaited"):
        pipeline.complete((0, 0))


def test_an_iteration_ends_when_every_slice_is_through_and_restarts_whole():
    pipeline = Pipeline(steps=1, slices=2)
    pipeline.to_post()
    pipeline.complete((0, 1))
    assert not pipeline.finished
    pipeline.complete((0, 0))
    assert pipeline.finished and pipeline.to_post() == []
    pipeline.restart()
    assert not pipeline.finished
    assert pipeline.to_post() == [(0, 0), (0, 1)]


def test_a_pipeline_needs_a_step_and_a_slice():
    for steps, slices in ((0, 1), (1, 0)):
        with pytest.raises(ValueError):
            Pipeline(steps, slices)
