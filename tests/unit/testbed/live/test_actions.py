"""The page's requests on their own (``ActionRequests``, stand-in operations): a request is
checked before anything runs; a prepared operation runs on a worker thread and the cut links
are read back after it; a transfer runs in the background, ten seconds when the page gives
neither bytes nor duration, and its record ends done with a summary or failed with the error."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from testbed.live.actions import ActionRequests
from testbed.live.state import LiveState
from topologies import load_topology


class StandIn:
    """Operations that record what they were asked and on which thread."""

    can_restart = False

    def __init__(self, transfer_error: str | None = None) -> None:
        self.transfer_error = transfer_error
        self.threads: list[str] = []
        self.specs: list = []
        self.cut: frozenset[str] = frozenset()

    def fail(self, a: str, b: str) -> str:
        self.threads.append(threading.current_thread().name)
        self.cut = frozenset({f"{a}<->{b}"})
        return f"cut {a} {b}"

    def restore(self, a: str, b: str) -> str:
        return "restored"

    def restart(self, switch: str) -> str:
        return "restarted"

    def transfer(self, spec, on_progress) -> dict:
        self.specs.append(spec)
        if self.transfer_error is not None:
            raise RuntimeError(self.transfer_error)
        return {"bytes": 1000, "seconds": 1.0, "goodput_bps": 8e3, "losses": 0}

    def cut_links(self) -> frozenset[str]:
        return self.cut

    def controllers(self) -> dict[str, str]:
        return {"primary": "dead", "backup": "primary"}

    def restart_controller(self, name: str) -> str:
        self.threads.append(threading.current_thread().name)
        return f"restarted the {name} controller: backup on every switch"


def _requests(actions: StandIn) -> tuple[ActionRequests, LiveState]:
    topology = load_topology("leaf-spine")
    state = LiveState(topology, can_restart=False)
    return ActionRequests(topology, actions, state), state


def test_a_refused_request_runs_nothing():
    actions = StandIn()
    requests, _ = _requests(actions)
    try:
        with pytest.raises(ValueError, match="no node 'nowhere'"):
            requests.prepare("fail", {"a": "l1", "b": "nowhere"})
    finally:
        requests.close()
    assert actions.threads == []


def test_an_operation_runs_on_a_worker_thread_and_the_cut_links_are_read_after_it():
    actions = StandIn()
    requests, state = _requests(actions)

    async def body() -> str:
        return await requests.perform(requests.prepare("fail", {"a": "l1:3", "b": "s1:1"}))

    try:
        message = asyncio.run(body())
    finally:
        requests.close()
    assert message == "cut l1:3 s1:1"
    assert actions.threads[0].startswith("live-action")
    assert state.cut == {"l1:3<->s1:1"}


@pytest.mark.parametrize("error", [None, "the receiver's agent is gone"])
def test_a_transfer_runs_in_the_background_and_its_record_ends_with_the_outcome(error):
    actions = StandIn(transfer_error=error)
    requests, state = _requests(actions)

    async def body() -> str:
        message = await requests.perform(
            requests.prepare("transfer", {"source": "h1", "destination": "h3"})
        )
        deadline = time.monotonic() + 10
        while state.transfers[1].state == "running" and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return message

    try:
        message = asyncio.run(body())
    finally:
        requests.close()
    (spec,) = actions.specs
    assert message == "transfer 1 started: h1 -> h3"
    assert (spec.duration_s, spec.total_bytes) == (10.0, None)
    record = state.transfers[1]
    if error is None:
        assert record.state == "done"
        assert record.summary == {"bytes": 1000, "seconds": 1.0, "goodput_bps": 8e3}
    else:
        assert (record.state, record.error) == ("failed", error)


def test_restarting_a_controller_runs_on_a_worker_thread_and_an_unknown_one_is_refused():
    actions = StandIn()
    requests, _ = _requests(actions)

    async def body() -> str:
        call = requests.prepare("controller_restart", {"controller": "primary"})
        return await requests.perform(call)

    try:
        with pytest.raises(ValueError, match="no 'standby' controller"):
            requests.prepare("controller_restart", {"controller": "standby"})
        message = asyncio.run(body())
    finally:
        requests.close()
    assert message == "restarted the primary controller: backup on every switch"
    assert actions.threads[0].startswith("live-action")
