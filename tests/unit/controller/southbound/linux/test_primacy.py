"""Two controllers of kernel switches agree through one lock file: only its holder writes,
the other waits, and the lock comes free when the holder dies, SIGKILL included."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from controller.intent import compute_intent
from controller.southbound.linux.primacy import PrimacyLock
from controller.southbound.linux.southbound import LinuxOptions, LinuxSouthbound
from topologies import Topology

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""

FORKING_HOLDER = """
import os, sys, time
from pathlib import Path
from controller.southbound.linux.primacy import PrimacyLock
lock = PrimacyLock(Path(sys.argv[1]))
assert lock.try_acquire()
child = os.fork()
if child == 0:  # what pyroute2 does to open a namespace socket: a fork that does not exec
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""
REPO = Path(__file__).resolve().parents[5]


def test_only_one_of_two_holds_the_lock_until_it_releases_it(tmp_path: Path) -> None:
    first, second = PrimacyLock(tmp_path / "ctl.lock"), PrimacyLock(tmp_path / "ctl.lock")
    assert first.try_acquire() and first.held
    assert not second.try_acquire() and not second.held
    first.release()
    assert second.try_acquire()
    second.release()


def test_a_holder_killed_with_sigkill_frees_the_lock_for_the_waiting_one(tmp_path: Path) -> None:
    path = tmp_path / "ctl.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        waiting = PrimacyLock(path)
        assert not waiting.try_acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(5)
        asyncio.run(asyncio.wait_for(waiting.acquire(interval=0.01), 5))
        assert waiting.held
        waiting.release()
    finally:
        holder.kill()
        holder.wait(5)


def test_a_southbound_without_the_lock_is_backup_and_refuses_to_program(
    tmp_path: Path, leaf_spine: Topology
) -> None:
    path = tmp_path / "ctl.lock"
    holder = PrimacyLock(path)
    assert holder.try_acquire()
    southbound = LinuxSouthbound(["l1"], LinuxOptions(primary_lock=path))
    assert not southbound.primary
    alone = LinuxSouthbound(["l1"])
    assert alone.primary, "without a lock file a controller is always primary"
    result = asyncio.run(southbound.program(compute_intent(leaf_spine).switch("l1")))
    assert not result.ours and result.writes == 0
    holder.release()


def test_a_forked_child_does_not_keep_the_lock_of_a_holder_killed_with_sigkill(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ctl.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", FORKING_HOLDER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    child = 0
    try:
        assert holder.stdout is not None
        child = int(holder.stdout.readline())
        waiting = PrimacyLock(path)
        assert not waiting.try_acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(5)
        os.kill(child, 0)  # the forked child outlives its parent
        asyncio.run(asyncio.wait_for(waiting.acquire(interval=0.01), 5))
        assert waiting.held
        waiting.release()
    finally:
        holder.kill()
        holder.wait(5)
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
