"""A run's timeline: each step acts once it is due, in order; finishing stops what is not due,
waits for the jobs it started, mends what is broken (a cut link restored, a powered-off
switch powered on) and waits until the controller sees every link up; a step that fails
stops the timeline and is kept, and the fabric is mended all the same."""

from __future__ import annotations

import threading
from typing import Any, cast

from experiments.schedule import Schedule
from testbed.session import Testbed
from topologies.model import Endpoint, LinkId


def _link(a: str, b: str) -> LinkId:
    return LinkId.between(Endpoint(a, 1), Endpoint(b, 1))


class FakeTestbed:
    """Records what was broken and mended; the controller sees links up unless told not to."""

    def __init__(self, links_seen_up: bool = True) -> None:
        self.calls: list[str] = []
        self.links_seen_up = links_seen_up

    def fail(self, a: str, b: str) -> LinkId:
        self.calls.append(f"fail {a} {b}")
        return _link(a, b)

    def restore(self, a: str, b: str) -> LinkId:
        self.calls.append(f"restore {a} {b}")
        return _link(a, b)

    def power_off(self, switch: str, dark: bool = True) -> list[LinkId]:
        self.calls.append(f"power_off {switch} dark={dark}")
        return [_link(switch, "l1"), _link(switch, "l2")]

    def power_on(self, switch: str, links: list[LinkId]) -> float | None:
        self.calls.append(f"power_on {switch} {len(links)} links")
        return 1.5

    def controller_tracks(self, link: LinkId) -> bool:
        return True

    def wait_link_state(self, link: LinkId, down: bool, timeout: float) -> float | None:
        self.calls.append(f"wait {link} up")
        return 0.1 if self.links_seen_up else None


def _schedule(testbed: FakeTestbed, **options: Any) -> Schedule:
    return Schedule(cast(Testbed, testbed), "test-schedule", **options)


def test_steps_act_in_order_once_due_and_a_step_not_due_never_acts() -> None:
    testbed = FakeTestbed()
    schedule = _schedule(testbed)
    acted: list[str] = []
    go = threading.Event()
    done = threading.Event()
    schedule.at(go.is_set, lambda: acted.append("first"))
    schedule.at(lambda: True, lambda: (acted.append("second"), done.set()))
    schedule.at(lambda: False, lambda: acted.append("never"))
    schedule.start()
    assert not done.wait(0.05) and acted == []
    go.set()
    assert done.wait(2.0)
    schedule.finish()
    assert acted == ["first", "second"]
    assert testbed.calls == []  # nothing was broken, nothing to mend


def test_a_cut_link_is_restored_at_the_finish_and_the_controller_waited_for() -> None:
    testbed = FakeTestbed()
    mended: list[str] = []
    schedule = _schedule(testbed, on_mend=lambda: mended.append("now"))
    schedule.at(lambda: True, lambda: schedule.cut_link("s1", "l2"))
    schedule.start()
    schedule.finish()
    link = _link("s1", "l2")
    assert testbed.calls == ["fail s1 l2", f"restore {link.a} {link.b}", f"wait {link} up"]
    assert mended == ["now"] and schedule.links == [link] and schedule.problems == []


def test_a_switch_powered_off_comes_back_once_however_often_mending_is_asked_for() -> None:
    testbed = FakeTestbed()
    mended: list[str] = []
    schedule = _schedule(testbed, on_mend=lambda: mended.append("now"))
    schedule.at(lambda: True, lambda: schedule.power_off("s1", dark=True))
    schedule.at(lambda: True, schedule.mend)
    schedule.start()
    schedule.finish()
    assert testbed.calls[:2] == ["power_off s1 dark=True", "power_on s1 2 links"]
    assert mended == ["now"] and schedule.switch_back_s == 1.5 and schedule.switch == "s1"
    assert len(schedule.links) == 2


def test_a_link_the_controller_does_not_see_up_again_is_a_problem() -> None:
    schedule = _schedule(FakeTestbed(links_seen_up=False))
    schedule.at(lambda: True, lambda: schedule.cut_link("s1", "l2"))
    schedule.start()
    schedule.finish()
    (problem,) = schedule.problems
    assert problem.startswith("the controller did not see") and "after the restore" in problem


def test_a_failing_step_stops_the_timeline_and_the_fabric_is_mended_all_the_same() -> None:
    testbed = FakeTestbed()
    schedule = _schedule(testbed)
    acted: list[str] = []

    def fail() -> None:
        schedule.cut_link("s1", "l2")
        raise RuntimeError("the switch did not answer")

    schedule.at(lambda: True, fail)
    schedule.at(lambda: True, lambda: acted.append("after"))
    schedule.start()
    schedule.finish()
    assert schedule.error == "RuntimeError: the switch did not answer"
    assert acted == [] and any(call.startswith("restore") for call in testbed.calls)


def test_finishing_waits_for_the_jobs_the_timeline_started() -> None:
    schedule = _schedule(FakeTestbed())
    finished: list[str] = []
    release = threading.Event()

    def job() -> None:
        release.wait(2.0)
        finished.append("job")

    schedule.at(lambda: True, lambda: (schedule.start_job("second", job), release.set()))
    schedule.start()
    schedule.finish()
    assert finished == ["job"]


def test_a_timeline_never_started_finishes_without_waiting() -> None:
    schedule = _schedule(FakeTestbed())
    schedule.at(lambda: True, lambda: None)
    schedule.finish()
    assert schedule.error is None
