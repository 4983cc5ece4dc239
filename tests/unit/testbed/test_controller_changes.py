"""A kill or restart of a run's controller acts on what it saw of the process: two restarts at
once (the CLI and a live view's button) start one process, and killing a dead one says so."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from testbed.controllers import PRIMARY, Controllers


class _Process:
    def __init__(self, running: bool) -> None:
        self.running = running
        self.pid = 7
        self.kills = 0

    def kill(self) -> None:
        self.kills += 1
        self.running = False


def _controllers(tmp_path: Path, process: _Process) -> Controllers:
    controllers = Controllers("leaf-spine", tmp_path, "t", ["l1", "l2"])
    controllers.runs[PRIMARY] = SimpleNamespace(process=process)  # type: ignore[assignment]
    return controllers


def test_two_restarts_at_once_start_one_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process = _Process(running=False)
    controllers = _controllers(tmp_path, process)
    starts: list[str] = []

    def start(name: str) -> Any:
        time.sleep(0.1)  # the window in which the other would see it still dead
        starts.append(name)
        process.running = True

    monkeypatch.setattr(controllers, "_start", start)
    monkeypatch.setattr(controllers, "wait_stance", lambda name, *stances: PRIMARY)
    outcomes: list[str] = []

    def restart() -> None:
        try:
            outcomes.append(controllers.restart(PRIMARY))
        except ValueError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=restart) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert starts == [PRIMARY]
    assert sorted(outcomes) == [PRIMARY, "the primary controller is running (pid 7)"]


def test_killing_a_dead_controller_says_it_was_not_running(tmp_path: Path) -> None:
    process = _Process(running=True)
    controllers = _controllers(tmp_path, process)
    controllers.kill(PRIMARY)
    with pytest.raises(ValueError, match="the primary controller is not running"):
        controllers.kill(PRIMARY)
    assert process.kills == 1
