"""The per-switch programmer: requests coalesce, writes never overlap, failures are retried with
a read-back, a switch that is not ours is left alone, and waiters learn the applied generation.

Every test runs on a fake clock (``run_on_clock``): a write that takes 20 ms, a retry after
10 ms and the test's own pauses happen in the order of their deadlines, however loaded the
machine is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from controller.app.programmer import RetryPolicy, SwitchProgrammer
from controller.intent import compute_intent
from controller.southbound.interface import ProgramResult
from tests.unit.controller.fakes import FakeClock, run_on_clock
from topologies import load_topology

INTENT = compute_intent(load_topology("leaf-spine")).switch("l1")


class Harness:
    def __init__(self, errors: list[str | None] | None = None, delay: float = 0.0) -> None:
        self.generation = 0
        self.calls: list[tuple[int, bool]] = []
        self.results: list[tuple[ProgramResult, int]] = []
        self.errors = list(errors or [])
        self.delay = delay
        self.running = 0
        self.max_running = 0
        self.programmer = SwitchProgrammer(
            "l1",
            lambda: (self.generation, INTENT),
            self.program,
            lambda result, generation: self.results.append((result, generation)),
            RetryPolicy(initial_s=0.01, max_s=0.04),
        )

    async def program(self, intent, read_back):
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        self.calls.append((self.generation, read_back))
        await asyncio.sleep(self.delay)
        self.running -= 1
        error = self.errors.pop(0) if self.errors else None
        ours = error != "not primary"
        return ProgramResult(intent.switch, read_back=read_back, error=error, ours=ours)


def _with_worker(harness: Harness, body: Callable[[], Awaitable[None]]) -> None:
    """Run ``body`` beside the harness's programmer, on a fake clock."""

    async def main() -> None:
        task = asyncio.create_task(harness.programmer.run())
        try:
            await body()
        finally:
            task.cancel()

    run_on_clock(FakeClock(), main)


def test_requests_during_a_write_coalesce_into_one_more_write_with_the_latest_intent():
    harness = Harness(delay=0.02)

    async def body():
        harness.programmer.request()
        await asyncio.sleep(0.005)
        assert harness.running == 1  # the first write is under way
        for generation in (1, 2, 3):
            harness.generation = generation
            harness.programmer.request()
        await asyncio.sleep(0.1)

    _with_worker(harness, body)
    assert [generation for generation, _ in harness.calls] == [0, 3]
    assert harness.max_running == 1


def test_a_read_back_request_is_kept_when_merged_with_plain_ones():
    harness = Harness(delay=0.02)

    async def body():
        harness.programmer.request()
        await asyncio.sleep(0.005)
        assert harness.running == 1  # the first write is under way
        harness.programmer.request(read_back=True)
        harness.programmer.request()
        await asyncio.sleep(0.1)

    _with_worker(harness, body)
    assert [read_back for _, read_back in harness.calls] == [False, True]


def test_a_failed_write_is_retried_with_a_read_back_until_it_succeeds():
    harness = Harness(errors=["UNKNOWN: boom", "UNKNOWN: boom", None])

    async def body():
        harness.programmer.request()
        await asyncio.sleep(0.2)

    _with_worker(harness, body)
    assert harness.calls == [(0, False), (0, True), (0, True)]
    assert [result.ok for result, _ in harness.results] == [False, False, True]
    assert harness.programmer.applied_generation == 0


def test_a_switch_that_is_not_ours_is_not_retried():
    harness = Harness(errors=["not primary"])

    async def body():
        harness.programmer.request()
        await asyncio.sleep(0.1)

    _with_worker(harness, body)
    assert len(harness.calls) == 1
    assert harness.programmer.applied_generation == -1


def test_an_exception_from_the_southbound_becomes_a_failed_result_and_the_worker_lives_on():
    harness = Harness()
    raised = []

    async def exploding(intent, read_back):
        if not raised:
            raised.append(True)
            raise RuntimeError("bug")
        return ProgramResult(intent.switch)

    harness.programmer._program = exploding

    async def body():
        harness.programmer.request()
        await asyncio.sleep(0.1)

    _with_worker(harness, body)
    first, second = (result for result, _ in harness.results)
    assert "internal" in (first.error or "") and second.ok


def test_waiters_learn_when_the_switch_holds_their_generation_or_a_newer_one():
    harness = Harness(delay=0.01)
    woke: list[int] = []

    async def body():
        async def wait(generation):
            await harness.programmer.wait_applied(generation)
            woke.append(generation)

        waiters = [asyncio.create_task(wait(g)) for g in (1, 2)]
        harness.generation = 2
        harness.programmer.request()
        await asyncio.wait_for(asyncio.gather(*waiters), 1.0)

    _with_worker(harness, body)
    assert sorted(woke) == [1, 2]


def test_reset_forgets_the_applied_generation_and_cancels_a_pending_retry():
    harness = Harness(errors=["UNKNOWN: boom"])

    async def body():
        harness.programmer.request()
        await asyncio.sleep(0.003)  # failed at once; its retry is due 10 ms after the failure
        assert len(harness.calls) == 1
        harness.programmer.reset()
        await asyncio.sleep(0.05)

    _with_worker(harness, body)
    assert len(harness.calls) == 1


def test_retry_delays_double_up_to_the_cap():
    policy = RetryPolicy(initial_s=0.2, max_s=1.0)
    delays = [policy.next_delay(None)]
    for _ in range(4):
        delays.append(policy.next_delay(delays[-1]))
    assert delays == [0.2, 0.4, 0.8, 1.0, 1.0]
