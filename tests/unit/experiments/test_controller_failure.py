"""The controller experiment's knobs and figures: a kill must come before the cut, within the
transfer; per transport the takeover's time and writes, the cut's time to its last write, the
transfers completed and the bytes lost, with their spread over seeds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from experiments.controller_failure import modes_of
from experiments.controller_failure.figures import summarize, text
from experiments.controller_failure.run import (
    ControllerParams,
    ControllerRunRecord,
    _reroute,
    _takeover,
)
from experiments.records import Transfer
from experiments.registry import EXPERIMENTS


@dataclass(frozen=True)
class _Run:
    record: ControllerRunRecord


def _record(takeover_s: float, writes: int, cut_s: float | None, lost: int = 0) -> _Run:
    transfer = Transfer(1000, 1000 - lost, lost, True, 8e6, {})
    return _Run(
        ControllerRunRecord(
            transport="mrc",
            transfers={"h1->h3": transfer},
            killed="primary",
            took_over="backup",
            takeover_s=takeover_s,
            takeover_writes=writes,
            cut_link="l2:1<->s1:2",
            cut_to_write_s=cut_s,
            cut_writes=4,
            rejoined_as="backup",
            problems=(),
        )
    )


def test_the_experiment_is_registered_runs_a_backup_and_compares_three_transports() -> None:
    experiment = EXPERIMENTS["controller"]
    assert experiment.backup, "every bring-up needs the second controller"
    assert modes_of(ControllerParams()) == ("mrc", "single", "roce:perftest")


@pytest.mark.parametrize(
    ("kill_at_s", "cut_at_s", "duration_s"), [(0.0, 5.0, 12.0), (6.0, 5.0, 12.0), (3.0, 13, 12)]
)
def test_the_kill_comes_before_the_cut_and_both_within_the_transfer(
    kill_at_s: float, cut_at_s: float, duration_s: float
) -> None:
    params = ControllerParams(kill_at_s=kill_at_s, cut_at_s=cut_at_s, duration_s=duration_s)
    with pytest.raises(ValueError, match="kill_at_s < cut_at_s < duration_s"):
        params.check()


def test_figures_give_each_measure_with_its_spread_over_seeds() -> None:
    runs = {
        "mrc": {0: _record(0.02, 0, 0.05), 1: _record(0.04, 0, 0.07), 2: _record(0.03, 0, None)}
    }
    figures = summarize(runs, None)  # type: ignore[arg-type]
    mrc = figures.transports["mrc"]
    assert (mrc.runs, mrc.completed, mrc.bytes_lost) == (3, 3, 0)
    assert mrc.takeover.mean == pytest.approx(0.03) and mrc.takeover.seeds == 3
    assert (mrc.takeover_writes, mrc.takeover_writes_max) == (0, 0)
    assert mrc.cut_to_write.seeds == 2, "a run without a reroute record gives no value"
    (line,) = text(figures)
    assert line.startswith("mrc: takeover 0.03 s (0.02-0.04) over 3 seeds, 0 writes on takeover")
    assert "cut to last write 0.06 s (0.05-0.07) over 2 seeds of 3" in line
    assert line.endswith("3/3 completed, 0 bytes lost")


class _FakeRun:
    """A controller's run whose event log is a canned list."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._events = events

    def events(self) -> list[dict[str, Any]]:
        return list(self._events)

    def wait_in_service(self, switches: list[str], after: int, timeout: float) -> None:
        pass


class _FakeControllers:
    switches = frozenset({"l1", "l2"})

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._run = _FakeRun(events)

    def wait_stance(self, name: str, stance: str, timeout: float) -> None:
        pass

    def run(self, name: str) -> _FakeRun:
        return self._run


CUT = "l2:1<->s1:2"


def _failover(mono: float, trigger: str, complete: bool = True, writes: int = 4) -> dict[str, Any]:
    return {
        "event": "failover",
        "mono": mono,
        "trigger": [trigger],
        "complete": complete,
        "writes": writes,
    }


def test_the_cut_is_timed_to_its_own_failover_record_not_a_flap_before_it() -> None:
    events = [
        {"event": "failover", "mono": 0.5, "trigger": [f"{CUT} down"], "complete": True},
        _failover(10.1, "l1:3<->s2:1 down", writes=1),  # a probe's flap after the mark
        _failover(10.3, "l1:3<->s2:1 up", writes=1),
        _failover(10.4, f"{CUT} down", writes=6),
    ]
    problems: list[str] = []
    assert _reroute(lambda: events, CUT, 1, 10.0, problems, 0.1) == (
        pytest.approx(0.4),
        6,
    )
    assert problems == []


def test_an_incomplete_reroute_is_a_problem_and_a_missing_one_has_no_time() -> None:
    problems: list[str] = []
    incomplete = [_failover(10.2, f"{CUT} down", complete=False)]
    assert _reroute(lambda: incomplete, CUT, 0, 10.0, problems, 0.1)[1] == 4
    assert len(problems) == 1 and "not complete" in problems[0]
    problems.clear()
    others = [_failover(10.2, "l1:3<->s2:1 down")]
    assert _reroute(lambda: others, CUT, 0, 10.0, problems, 0.1) == (None, None)
    assert len(problems) == 1 and f"{CUT} down" in problems[0]


def test_the_takeover_is_timed_to_the_last_switch_and_a_log_without_one_is_a_problem() -> None:
    connected = [
        {"event": "switch_connected", "role": "backup", "mono": 1.0},
        {"event": "switch_connected", "role": "primary", "mono": 5.2},
        {"event": "program", "inserts": 1, "modifies": 2, "deletes": 0},
        {"event": "switch_connected", "role": "primary", "mono": 5.5},
    ]
    problems: list[str] = []
    controllers: Any = _FakeControllers(connected)
    took = _takeover(controllers, "backup", 1, 5.0, problems)
    assert took == (pytest.approx(0.5), 3) and problems == []
    controllers = _FakeControllers(connected[:1] + connected[2:3])
    assert _takeover(controllers, "backup", 1, 5.0, problems) == (None, 3)
    assert len(problems) == 1 and "no switch_connected primary" in problems[0]
