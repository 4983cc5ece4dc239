"""One failover run's cut on a stand-in testbed: a drawn cut is the seed's, whatever each
contender's traffic, and breaks even where the counters cannot be read (its exposure then
unknown); a busiest cut follows the traffic and breaks nothing it cannot choose by."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from experiments.experiment import parse_params
from experiments.failover.cuts import Cuts
from experiments.failover.modes import Params
from experiments.placements import Placement
from experiments.registry import EXPERIMENTS
from experiments.timeline import RunClock
from tests.unit.experiments.statuses import member_status
from topologies import load_topology

FLOWS = [("h1", "h3")]
QUIET = member_status({f"s{i}": {2: 0} for i in range(1, 5)})


class _Testbed:
    """What Cuts asks of a testbed: the topology, status snapshots in turn (the run's start,
    the probe, a probe again), and the link it cuts and restores."""

    def __init__(self, *statuses: dict[str, Any]) -> None:
        self.topology = load_topology("leaf-spine")
        self._statuses = list(statuses)
        self.cut: list[tuple[str, str]] = []

    def status(self) -> dict[str, Any]:
        return self._statuses.pop(0) if len(self._statuses) > 1 else self._statuses[0]

    def fail(self, a: str, b: str) -> SimpleNamespace:
        self.cut.append((a, b))
        return SimpleNamespace(a=a, b=b)

    def restore(self, a: str, b: str) -> None:
        del a, b

    def controller_tracks(self, link: object) -> bool:
        del link
        return False


def _through(spine: str) -> dict[str, Any]:
    """A probe after a one-path flow into l2 went through ``spine``."""
    return member_status({f"s{i}": {2: 4000 if f"s{i}" == spine else 0} for i in range(1, 5)})


def _run(testbed: _Testbed, seed: int, choice: str = "random") -> Cuts:
    """The run's cut and restore, its clock already past both."""
    params = Params(cut_choice=choice)
    ticks = [100.0]
    clock = RunClock(lambda: ticks[0])
    cuts = Cuts(testbed, params, Placement.REMOTE, FLOWS, clock, seed)  # type: ignore[arg-type]
    clock.observe(0, {"elapsed_s": 0.0})
    ticks[0] += params.restore_at_s + 1
    cuts.start()
    deadline = time.monotonic() + 5
    while cuts.restore_s is None and cuts.cut_error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    cuts.finish()
    return cuts


def test_the_cut_is_random_by_default_and_busiest_on_request() -> None:
    failover = EXPERIMENTS["failover"]
    assert parse_params(failover, {}).cut_choice == "random"
    assert parse_params(failover, {"cut_choice": "busiest"}).choice() == "busiest"
    with pytest.raises(ValueError, match=r"unknown cut choice widest \(choose one of random"):
        parse_params(failover, {"cut_choice": "widest"})


def test_every_contender_of_a_seed_meets_the_same_drawn_cut_whatever_its_path() -> None:
    # as if one contender's flow went via s1 and another's via s3
    seed_0 = [_run(_Testbed(QUIET, _through(spine)), seed=0) for spine in ("s1", "s3", "s4")]
    assert {cuts.cut.name for cuts in seed_0 if cuts.cut} == {"s4:2-l2"}
    assert [cuts.testbed.cut for cuts in seed_0] == [[("s4:2", "l2")]] * 3
    assert [cuts.exposures()["h1->h3"].exposed for cuts in seed_0] == [False, False, True]
    assert _run(_Testbed(QUIET, _through("s4")), seed=1).cut.name == "s2:2-l2"  # type: ignore[union-attr]


def test_a_busiest_cut_is_the_flows_own_path() -> None:
    for spine in ("s1", "s3"):
        cuts = _run(_Testbed(QUIET, _through(spine)), seed=0, choice="busiest")
        assert cuts.cut is not None and cuts.cut.name == f"{spine}:2-l2"
        assert cuts.cut.packets == 4000 and cuts.exposures()["h1->h3"].exposed is True


def test_unread_counters_leave_a_busiest_run_uncut_and_a_drawn_cut_of_unknown_exposure() -> None:
    unread = member_status({f"s{i}": {2: 0} for i in range(1, 5)})
    unread["counters"]["s2"] = {"error": "timed out"}
    busiest = _run(_Testbed(QUIET, unread), seed=0, choice="busiest")
    assert busiest.cut is None and busiest.testbed.cut == []
    assert busiest.cut_error == "s2: counters unavailable (timed out)"
    assert busiest.exposures() == {}
    drawn = _run(_Testbed(QUIET, unread), seed=0)
    assert drawn.cut is not None and (drawn.cut.name, drawn.cut.packets) == ("s4:2-l2", None)
    assert drawn.cut_error is None
    (exposure,) = drawn.exposures().values()
    assert exposure.exposed is None
    assert exposure.unknown == "counters unread: s2: counters unavailable (timed out)"
