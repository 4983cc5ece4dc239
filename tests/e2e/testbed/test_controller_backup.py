"""A backup controller on each target (``Testbed.open(..., backup=True)``, ``--backup``): the
primary is killed with SIGKILL during an MRC transfer, the backup becomes primary on every
switch writing nothing (nothing changed), then a fabric link is cut and the backup reroutes
it; the transfer completes with no byte lost. A cut made while the primary acts is followed
by the backup, so its takeover writes nothing either; a restarted primary rejoins as backup;
with both dead the fabric is unmanaged, forwards still, and a restarted one takes it.

Needs root and Mininet, and per target BMv2 or kernel switches; skips with the reason
otherwise.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.metrics import transfer_metrics
from testbed.agents import TransferSpec
from testbed.controllers import BACKUP, PRIMARY

pytestmark = pytest.mark.mininet

#: Long enough for the kill, the takeover and the cut to land inside it.
TRANSFER_S = 8.0
#: The kill comes once the transfer runs; the cut once the backup is primary.
KILL_AFTER_S = 1.5
TAKEOVER_WITHIN_S = 20.0
#: How long the takeover itself may take, kill to primary on the last switch (the lock is
#: polled every 20 ms, a backup's stream asks for mastership at once): well under the wait.
TAKEOVER_BOUND_S = 5.0
REROUTE_WITHIN_S = 20.0


def _writes(events: list[dict[str, Any]]) -> int:
    return sum(
        e["inserts"] + e["modifies"] + e["deletes"] for e in events if e["event"] == "program"
    )


def _wait_for(events: Any, name: str, timeout: float, after: int) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in events()[after:]:
            if event.get("event") == name:
                return dict(event)
        time.sleep(0.1)
    raise AssertionError(f"no {name} event within {timeout} s")


def test_the_backup_takes_over_a_killed_primary_writing_nothing_then_reroutes_a_cut(
    testbed_target: str, runs_dir: Path, leaf_spine_file: Path
) -> None:
    from testbed.session import Testbed

    with Testbed.open(str(leaf_spine_file), testbed_target, backup=True) as testbed:
        controllers = testbed.controllers
        assert controllers is not None
        backup = controllers.run(BACKUP)
        assert controllers.state(BACKUP).stance(controllers.switches) == BACKUP
        assert _writes(backup.events()) == 0, "a backup wrote while the primary was alive"
        results: list[dict[str, Any]] = []
        transfer = threading.Thread(
            target=lambda: results.append(
                testbed.transfer(TransferSpec("h1", "h3", duration_s=TRANSFER_S))
            )
        )
        transfer.start()
        try:
            time.sleep(KILL_AFTER_S)
            killed_at = testbed.kill_controller(PRIMARY)
            controllers.wait_stance(BACKUP, PRIMARY, timeout=TAKEOVER_WITHIN_S)
            took_over = [e for e in backup.events() if e["event"] == "switch_connected"][
                -len(controllers.switches) :
            ]
            assert {e["role"] for e in took_over} == {"primary"}
            assert max(e["mono"] for e in took_over) - killed_at < TAKEOVER_BOUND_S
            reconciled = _wait_for(backup.events, "switch_in_service", REROUTE_WITHIN_S, 0)
            assert reconciled
            controllers.run(BACKUP).wait_in_service(sorted(controllers.switches))
            assert _writes(backup.events()) == 0, "the takeover rewrote what the switches held"
            assert testbed.controller is backup
            mark = len(backup.events())
            testbed.fail("l1", "s1")
            # Else the transfer ended before the cut, and nothing tests a reroute under it.
            assert transfer.is_alive(), "the transfer was over before the cut"
            failover = _wait_for(backup.events, "failover", REROUTE_WITHIN_S, mark)
            assert failover["complete"] and failover["writes"] > 0
        finally:
            transfer.join()
        assert len(results) == 1
        metrics = transfer_metrics(results[0])  # type: ignore[arg-type]
        assert metrics.completed, results[0]
        assert metrics.bytes_lost == 0


def _wait_down(run: Any, link: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while link not in run.status()["down_links"]:
        assert time.monotonic() < deadline, f"{link} not down in the backup's view"
        time.sleep(0.1)


def test_a_cut_the_backup_followed_costs_no_write_at_takeover_then_rejoin_and_none_left(
    testbed_target: str, runs_dir: Path, leaf_spine_file: Path
) -> None:
    from controller.app.status_socket import StatusUnavailable
    from testbed.controller_watch import ControllerWatch
    from testbed.session import Testbed

    with Testbed.open(str(leaf_spine_file), testbed_target, backup=True) as testbed:
        controllers = testbed.controllers
        assert controllers is not None
        watch = ControllerWatch(controllers, say=lambda line: None)
        backup = controllers.run(BACKUP)
        # Cut while the primary acts: the backup follows (carrier on linux, the primary's
        # stream where links are probed), so taking over changes nothing.
        link = str(testbed.fail("l1", "s1"))
        _wait_down(backup, link, REROUTE_WITHIN_S)
        mark = len(backup.events())
        testbed.kill_controller(PRIMARY)
        controllers.wait_stance(BACKUP, PRIMARY, timeout=TAKEOVER_WITHIN_S)
        backup.wait_in_service(sorted(controllers.switches), after=mark)
        assert _writes(backup.events()[mark:]) == 0, "the backup did not follow the cut"
        # P4Runtime: the backup took over at the primary's election id (finsy bids the id the
        # switch names), so the restarted one, bidding the same, steps below it; linux: the
        # lock's holder stays primary and the restarted one waits.
        assert testbed.restart_controller(PRIMARY) == BACKUP
        assert "controller primary rejoined as backup" in " ".join(watch.poll())
        testbed.kill_controller(PRIMARY)
        testbed.kill_controller(BACKUP)
        assert any("unmanaged" in line for line in watch.poll())
        with pytest.raises(StatusUnavailable, match="unmanaged"):
            testbed.status()
        result = testbed.transfer(TransferSpec("h1", "h3", total_bytes=1 << 20))
        metrics = transfer_metrics(result)  # type: ignore[arg-type]
        assert metrics.completed and metrics.bytes_lost == 0, "the switches kept forwarding"
        assert testbed.restart_controller(BACKUP) == PRIMARY
        assert testbed.status()["switches"]["l1"]["role"] == "primary"
