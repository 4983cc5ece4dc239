"""Which of two controllers of kernel switches writes: the one holding a lock file.

Netlink has no arbitration (P4Runtime's election ids): any process that can open a namespace
may write to it, so two controllers of one fabric agree through ``flock(2)`` on a file they
both name (``--primary-lock``). ``flock`` is used, rather than a pid file or a heartbeat,
because the kernel releases the lock when the holder's last descriptor closes, which a
process killed with SIGKILL does too: there is no stale lock to detect and no timeout to
tune, and a lock held means a live holder.

The lock belongs to the open file, not to the process: a forked child that inherits the
descriptor keeps the lock alive after its parent dies. ``O_CLOEXEC`` covers a child that execs;
pyroute2 opens its namespace sockets from forked children that do not (see
``namespace.py``), so every child closes its copies of held descriptors right after the fork
(``os.register_at_fork``), and the lock still lives exactly as long as its holder.

The waiting controller polls with ``LOCK_NB`` (every :data:`POLL_INTERVAL_S`) instead of
blocking in a thread: a thread blocked in ``flock`` cannot be cancelled, and would hold up
the controller's own shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import weakref
from pathlib import Path

#: How often a waiting controller tries the lock; bounds the takeover's detection time.
POLL_INTERVAL_S = 0.02


#: The locks this process holds, whose descriptors a forked child closes at once.
_HELD: weakref.WeakSet[PrimacyLock] = weakref.WeakSet()


def _forget_in_child() -> None:
    """In a forked child: close the copies of held descriptors (the parent keeps its own)."""
    for lock in list(_HELD):
        lock._forget()
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class PrimacyLock:
    """An exclusive ``flock`` on ``path``, held until :meth:`release` or the process ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free; whether we hold it now."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        _HELD.add(self)
        return True

    async def acquire(self, interval: float = POLL_INTERVAL_S) -> None:
        """Wait until the lock is ours (cancellable)."""
        while not self.try_acquire():
            await asyncio.sleep(interval)

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases it)."""
        _HELD.discard(self)
        self._forget()

    def _forget(self) -> None:
        """Close our descriptor: the lock's release here, or, in a forked child, just the
        child's copy (the parent's descriptor still holds it)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
