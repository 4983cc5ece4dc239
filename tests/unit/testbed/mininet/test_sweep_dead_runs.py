"""What a cluster's worker sweeps before it joins (``sweep_dead_runs``): the runs recorded
under this machine's runs root whose owner is dead (a runner killed with its worker), each
swept and its record removed; a run whose owner lives is left alone (and nothing but the
records under this root is looked at: on a shared machine the rest is someone else's). And
what it sweeps when it stops (``sweep_own_runs``): the runs this very process owns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testbed.mininet import cleanup
from testbed.mininet.runs import RECORD_FILE, RUNS_ROOT_ENV, process_start_time


def _record(root: Path, prefix: str, pid: int, start: int | None) -> None:
    (root / prefix).mkdir(parents=True)
    record = {
        "prefix": prefix,
        "owner_pid": pid,
        "owner_start_time": start,
        "topology": "leaf-spine",
        "started_at": 0.0,
    }
    (root / prefix / RECORD_FILE).write_text(json.dumps(record))


def test_only_runs_recorded_here_with_a_dead_owner_are_swept_and_their_records_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    monkeypatch.setenv(RUNS_ROOT_ENV, str(root))
    me = os.getpid()
    # a pid that is this process but started at another time: its owner is gone
    _record(root, "mndead", me, (process_start_time(me) or 0) + 1)
    _record(root, "mn1a1e", me, process_start_time(me))
    swept: list[str] = []

    def sweep(prefix: str) -> cleanup.Leftovers:
        swept.append(prefix)
        return cleanup.Leftovers((), (), ())

    monkeypatch.setattr(cleanup, "sweep", sweep)
    left = cleanup.sweep_dead_runs()
    assert swept == ["mndead"] and list(left) == ["mndead"] and left["mndead"].empty
    assert not (root / "mndead").exists()
    assert (root / "mn1a1e" / RECORD_FILE).is_file()


def test_a_process_sweeps_the_runs_it_owns_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    monkeypatch.setenv(RUNS_ROOT_ENV, str(root))
    me = os.getpid()
    _record(root, "mn0a0a", me, process_start_time(me))
    _record(root, "mnbeef", me, (process_start_time(me) or 0) + 1)  # an earlier process's
    _record(root, "mn1b1b", 1, process_start_time(1))  # another live owner's
    swept: list[str] = []

    def sweep(prefix: str) -> cleanup.Leftovers:
        swept.append(prefix)
        return cleanup.Leftovers((), (), ())

    monkeypatch.setattr(cleanup, "sweep", sweep)
    left = cleanup.sweep_own_runs()
    assert swept == ["mn0a0a"] and list(left) == ["mn0a0a"]
    assert not (root / "mn0a0a").exists()
    assert (root / "mnbeef" / RECORD_FILE).is_file() and (root / "mn1b1b" / RECORD_FILE).is_file()
