"""What the testbed says about its controllers: each death, a takeover, a rejoin (as backup or
taking over, and why), and a fabric left with none; nothing when nothing changed."""

from __future__ import annotations

from pathlib import Path

from testbed.controller_watch import ControllerWatch, describe
from testbed.controllers import (
    BACKUP,
    BACKUP_ELECTION_ID,
    PRIMARY,
    ControllerState,
    arbitration_arguments,
)

SWITCHES = frozenset({"l1", "l2"})
ALL = SWITCHES


def primary(pid: int = 1) -> ControllerState:
    return ControllerState(alive=True, pid=pid, primary_on=ALL)


def backup(pid: int = 2) -> ControllerState:
    return ControllerState(alive=True, pid=pid, backup_on=ALL)


def dead(pid: int) -> ControllerState:
    return ControllerState(alive=False, pid=pid)


def test_nothing_is_said_while_nothing_changes() -> None:
    states = {PRIMARY: primary(), BACKUP: backup()}
    assert describe(states, states, SWITCHES) == []


def test_a_dead_primary_and_the_backup_taking_over_are_each_one_line() -> None:
    before = {PRIMARY: primary(), BACKUP: backup()}
    died = {PRIMARY: dead(1), BACKUP: backup()}
    assert describe(before, died, SWITCHES) == ["controller primary (pid 1) died"]
    took = {PRIMARY: dead(1), BACKUP: ControllerState(True, 2, primary_on=ALL)}
    assert describe(died, took, SWITCHES) == [
        "controller backup took over: primary on every switch"
    ]


def test_a_takeover_half_done_is_not_announced_yet() -> None:
    died = {PRIMARY: dead(1), BACKUP: backup()}
    half = {PRIMARY: dead(1), BACKUP: ControllerState(True, 2, {"l1"}, {"l2"})}
    assert describe(died, half, SWITCHES) == []


class _Looks:
    """Controllers as the watch sees them: one canned moment per look."""

    switches = SWITCHES
    arbitrated = True

    def __init__(self, *moments: dict[str, ControllerState]) -> None:
        self._moments = list(moments)

    def states(self) -> dict[str, ControllerState]:
        return self._moments.pop(0)


def test_a_takeover_seen_half_done_is_still_a_takeover_on_the_next_look() -> None:
    died = {PRIMARY: dead(1), BACKUP: backup()}
    half = {
        PRIMARY: dead(1),
        BACKUP: ControllerState(True, 2, frozenset({"l1"}), frozenset({"l2"})),
    }
    took = {PRIMARY: dead(1), BACKUP: ControllerState(True, 2, primary_on=ALL)}
    watch = ControllerWatch(_Looks(died, half, took), say=print)  # type: ignore[arg-type]
    assert watch.poll() == []
    assert watch.poll() == ["controller backup took over: primary on every switch"]


def test_a_restart_seen_connecting_still_rejoins_on_the_next_look() -> None:
    before = {PRIMARY: primary(1), BACKUP: backup()}
    restarted = {PRIMARY: ControllerState(True, 3), BACKUP: backup()}
    won = {PRIMARY: primary(3), BACKUP: backup()}
    watch = ControllerWatch(_Looks(before, restarted, won), say=print)  # type: ignore[arg-type]
    assert watch.poll() == ["controller primary restarted (pid 3)"]
    assert watch.poll() == ["controller primary rejoined as primary on every switch"]


def test_both_dead_says_the_fabric_is_unmanaged_once() -> None:
    before = {PRIMARY: dead(1), BACKUP: primary(2)}
    after = {PRIMARY: dead(1), BACKUP: dead(2)}
    lines = describe(before, after, SWITCHES)
    assert lines[0] == "controller backup (pid 2) died"
    assert "unmanaged" in lines[1] and "forward with what they hold" in lines[1]
    assert describe(after, after, SWITCHES) == []


def test_a_restarted_primary_rejoins_as_backup_under_a_lock_or_takes_over_by_election_id() -> None:
    before = {PRIMARY: dead(1), BACKUP: primary(2)}
    restarted = {PRIMARY: ControllerState(True, 3), BACKUP: primary(2)}
    assert describe(before, restarted, SWITCHES) == ["controller primary restarted (pid 3)"]
    waiting = {PRIMARY: backup(3), BACKUP: primary(2)}
    assert describe(restarted, waiting, SWITCHES, arbitrated=False) == [
        "controller primary rejoined as backup (the other holds the lock)"
    ]
    won = {PRIMARY: primary(3), BACKUP: backup(2)}
    assert describe(restarted, won, SWITCHES) == [
        "controller primary rejoined as primary on every switch",
        "controller backup is backup now: the other took over (by election id)",
    ]


def test_a_primary_restarted_between_two_looks_rejoins_rather_than_steps_down() -> None:
    before = {PRIMARY: primary(1), BACKUP: backup(2)}
    after = {PRIMARY: backup(3), BACKUP: primary(2)}
    assert describe(before, after, SWITCHES, arbitrated=False) == [
        "controller primary rejoined as backup (the other holds the lock)",
        "controller backup took over: primary on every switch",
    ]


def test_a_lone_controller_needs_no_arbitration_arguments(tmp_path: Path) -> None:
    assert arbitration_arguments(PRIMARY, False, True, tmp_path / "l") == []
    assert arbitration_arguments(PRIMARY, False, False, tmp_path / "l") == []


def test_a_backup_has_a_lower_election_id_where_switches_arbitrate(tmp_path: Path) -> None:
    assert arbitration_arguments(PRIMARY, True, True, tmp_path / "l") == []
    assert arbitration_arguments(BACKUP, True, True, tmp_path / "l") == [
        "--election-id",
        str(BACKUP_ELECTION_ID),
    ]
    assert BACKUP_ELECTION_ID < 10


def test_both_share_one_lock_file_where_switches_do_not_arbitrate(tmp_path: Path) -> None:
    for name in (PRIMARY, BACKUP):
        assert arbitration_arguments(name, True, False, tmp_path / "l") == [
            "--primary-lock",
            str(tmp_path / "l"),
        ]
