"""Batched execution: phases cut into requests of bounded size, refused updates reported with
their entity, independent updates still applied, and an unknown state after a lost request."""

from __future__ import annotations

import asyncio

import pytest

from controller.intent import compute_intent
from controller.southbound.mapping import desired_records
from controller.southbound.plan import Operation, Update, WritePlan, plan_writes
from controller.southbound.records import RecordSet
from controller.southbound.writer import (
    BatchWriteError,
    WriteOutcome,
    execute_plan,
    iter_batches,
)
from topologies import load_topology

DESIRED = desired_records(compute_intent(load_topology("leaf-spine")).switch("l1"))
FULL_PLAN = plan_writes(RecordSet(), DESIRED)


class Recorder:
    """A send function that records batches and refuses what it is told to."""

    def __init__(self, refuse: dict[int, dict[int, str]] | None = None, lose: int | None = None):
        self.batches: list[tuple[Update, ...]] = []
        self.refuse = refuse or {}
        self.lose = lose

    async def __call__(self, batch: tuple[Update, ...]) -> None:
        number = len(self.batches)
        self.batches.append(batch)
        if number == self.lose:
            raise BatchWriteError("UNAVAILABLE: channel closed")
        if number in self.refuse:
            raise BatchWriteError("UNKNOWN: batch had errors", self.refuse[number])


def _run(plan: WritePlan, send: Recorder, max_batch: int = 1000) -> WriteOutcome:
    return asyncio.run(execute_plan(plan, send, max_batch))


def test_each_phase_goes_in_one_request_when_it_fits():
    send = Recorder()
    outcome = _run(FULL_PLAN, send)
    assert outcome.ok and outcome.requests == len(FULL_PLAN.phases) == 3
    assert [len(b) for b in send.batches] == [len(p) for p in FULL_PLAN.phases]


def test_batches_never_exceed_the_limit_nor_span_two_phases():
    batches = list(iter_batches(FULL_PLAN, 7))
    assert all(1 <= len(batch) <= 7 for batch in batches)
    for batch in batches:
        assert len({update.record.level for update in batch}) == 1
    assert [u for batch in batches for u in batch] == list(FULL_PLAN.updates)


def test_max_batch_one_sends_one_update_per_request():
    send = Recorder()
    outcome = _run(FULL_PLAN, send, max_batch=1)
    assert outcome.requests == len(FULL_PLAN) == len(send.batches)


def test_a_batch_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        list(iter_batches(FULL_PLAN, 0))


def test_refused_updates_are_reported_with_their_entity_and_the_others_applied():
    send = Recorder(refuse={2: {0: "ALREADY_EXISTS: entry exists"}})
    outcome = _run(FULL_PLAN, send)
    assert outcome.complete and not outcome.ok
    (failure,) = outcome.failures
    assert failure.update == send.batches[2][0]
    assert "ALREADY_EXISTS" in failure.describe()
    assert failure.update.record.describe() in failure.describe()
    assert len(outcome.applied) == len(FULL_PLAN) - 1


def test_what_the_switch_holds_after_a_partial_failure_lacks_only_the_refused_update():
    send = Recorder(refuse={1: {1: "INVALID_ARGUMENT"}})
    outcome = _run(FULL_PLAN, send)
    held = outcome.held_after(RecordSet())
    assert held is not None
    missing = set(DESIRED) - set(held)
    assert missing == {send.batches[1][1].record.key}


def test_a_lost_request_stops_the_plan_and_leaves_the_state_unknown():
    send = Recorder(lose=1)
    outcome = _run(FULL_PLAN, send)
    assert not outcome.complete and outcome.error == "UNAVAILABLE: channel closed"
    assert len(send.batches) == 2
    assert outcome.held_after(RecordSet()) is None
    assert len(outcome.failures) == len(send.batches[1])


def test_deletes_leave_the_held_state_except_the_undeletable_default_entry():
    plan = plan_writes(DESIRED, RecordSet())
    outcome = _run(plan, Recorder())
    assert outcome.ok
    assert outcome.applied
    assert all(u.operation is Operation.DELETE for u in outcome.applied)
    defaults = [r for r in DESIRED.values() if getattr(r, "is_default", False)]
    assert outcome.held_after(DESIRED) == RecordSet(defaults)
