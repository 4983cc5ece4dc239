"""The time left: planned steps take their plan plus the overhead the steps measured so far
add to theirs, unplanned ones what the measured ones took; bring-ups are counted apart, each
left one at what the ended ones cost; before any step has ended only the plans are known,
and the estimate says it is a lower bound."""

from __future__ import annotations

import pytest

from experiments.progress.estimate import Estimate, Left


def test_before_any_step_the_plans_are_a_lower_bound() -> None:
    estimate = Estimate([10.0, 10.0, 5.0])
    assert estimate.left(now=0.0) == Left(25.0, at_least=True)


def test_a_step_without_a_plan_leaves_the_time_unknown_until_one_has_ended() -> None:
    estimate = Estimate([None, None])
    assert estimate.left(now=0.0) is None
    estimate.step_began(0, now=0.0)
    estimate.step_ended(0, now=40.0)
    assert estimate.left(now=40.0) == Left(40.0, at_least=False)


def test_planned_steps_left_take_their_plan_plus_the_measured_overhead() -> None:
    estimate = Estimate([10.0, 10.0, 20.0])
    estimate.step_began(0, now=0.0)
    assert estimate.step_ended(0, now=13.0) == 13.0
    # 3 s over its plan: the next two are expected at 13 s and 23 s
    assert estimate.left(now=13.0) == Left(36.0, at_least=False)


def test_the_running_step_counts_only_what_it_has_left() -> None:
    estimate = Estimate([10.0, 10.0])
    estimate.step_began(0, now=0.0)
    estimate.step_ended(0, now=10.0)
    estimate.step_began(1, now=10.0)
    assert estimate.left(now=14.0) == Left(6.0, at_least=False)
    # overrunning its expected length, it is expected to end any moment, never below zero
    assert estimate.left(now=30.0) == Left(0.0, at_least=False)


def test_bring_ups_left_cost_what_the_ended_ones_cost_besides_their_steps() -> None:
    estimate = Estimate([5.0, 5.0, 5.0, 5.0], setups=2)
    estimate.setup_began(now=0.0)
    estimate.step_began(0, now=20.0)  # 20 s to bring up
    estimate.step_ended(0, now=25.0)
    estimate.step_began(1, now=25.0)
    estimate.step_ended(1, now=30.0)
    estimate.setup_ended(now=34.0)  # 4 s to tear down: the bring-up cost 24 s
    assert estimate.left(now=34.0) == Left(24.0 + 2 * 5.0, at_least=False)
    estimate.setup_began(now=34.0)
    # 6 s into the second bring-up: 18 s of it left, by the first one's cost
    assert estimate.left(now=40.0) == Left(18.0 + 2 * 5.0, at_least=False)


def test_before_a_bring_up_has_ended_the_current_ones_cost_so_far_stands_for_each() -> None:
    estimate = Estimate([5.0, 5.0], setups=2)
    estimate.setup_began(now=0.0)
    estimate.step_began(0, now=30.0)
    assert estimate.left(now=32.0) == Left(3.0 + 5.0 + 30.0, at_least=True)


def test_a_step_that_ends_early_makes_no_negative_time() -> None:
    estimate = Estimate([10.0, 1.0])
    estimate.step_began(0, now=0.0)
    estimate.step_ended(0, now=2.0)  # 8 s under its plan
    assert estimate.left(now=2.0) == Left(0.0, at_least=False)


@pytest.mark.parametrize("steps", [1, 3])
def test_once_every_step_and_bring_up_has_ended_nothing_is_left(steps: int) -> None:
    estimate = Estimate([None] * steps, setups=1)
    estimate.setup_began(now=0.0)
    for index in range(steps):
        estimate.step_began(index, now=float(index))
        estimate.step_ended(index, now=index + 0.5)
    estimate.setup_ended(now=steps + 1.0)
    assert estimate.done == steps
    assert estimate.left(now=steps + 1.0) == Left(0.0, at_least=False)
