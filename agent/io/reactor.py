"""A minimal event loop: readiness callbacks on file descriptors, and deadline timers.

The agent's loop is one thread around ``selectors`` (epoll on Linux) instead of asyncio: the
data path is a handful of sockets that are drained in batches, and a thin loop keeps the
per-wakeup cost at a couple of system calls. The MRC core's own timers are not scheduled here
(the runtime asks the core for its next deadline each turn); these timers are the slow ones of
the side channel, the control socket and the tools (handshake timeouts, progress reports).

A callback that raises harms only what it serves: the reactor hands the exception to the
watch's ``on_error`` (a channel closes itself), or, without one, logs it and stops watching
that object; a failing timer is logged and the others run. ``BaseException``s that are not
``Exception``s (Ctrl-C, SystemExit) still end the loop.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
from collections.abc import Callable
from typing import Protocol

ReadyCallback = Callable[[int], None]
"""Called with the ready mask (``selectors.EVENT_READ`` / ``EVENT_WRITE``)."""

ErrorCallback = Callable[[BaseException], None]
"""Called with the exception a watch's callback raised."""

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE

log = logging.getLogger(__name__)


class HasFileno(Protocol):
    """Anything the selector can watch."""

    def fileno(self) -> int:
        """The file descriptor."""
        ...


class Timer:
    """A scheduled callback; ``cancel`` stops it from running."""

    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run this timer."""
        self.cancelled = True


class Reactor:
    """Selector plus timer heap; the caller supplies the clock reading for each turn."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Timer]] = []
        self._sequence = itertools.count()
        self._on_error: dict[int, ErrorCallback] = {}
        #: Callbacks and timers that raised (each isolated, see the module docstring).
        self.callback_errors = 0

    def watch(
        self,
        fileobj: HasFileno,
        events: int,
        callback: ReadyCallback,
        on_error: ErrorCallback | None = None,
    ) -> None:
        """Call ``callback(mask)`` when ``fileobj`` is ready for ``events`` (replaces any
        earlier watch of the same object); ``on_error(exc)`` if the callback raises."""
        try:
            key = self._selector.modify(fileobj, events, callback)
        except KeyError:
            key = self._selector.register(fileobj, events, callback)
        if on_error is None:
            self._on_error.pop(key.fd, None)
        else:
            self._on_error[key.fd] = on_error

    def unwatch(self, fileobj: HasFileno) -> None:
        """Stop watching ``fileobj`` (no error if it was not watched)."""
        with contextlib.suppress(KeyError, ValueError):
            key = self._selector.unregister(fileobj)
            self._on_error.pop(key.fd, None)

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` at the first turn on or after ``when``."""
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._sequence), timer))
        return timer

    def next_deadline(self) -> float | None:
        """When the earliest live timer is due, or None."""
        timers = self._timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    def poll(self, timeout: float | None) -> int:
        """Wait up to ``timeout`` seconds (None: forever) and run the ready callbacks.
        Returns how many were ready."""
        ready = self._selector.select(timeout)
        for key, mask in ready:
            try:
                key.data(mask)
            except Exception as exc:
                self._isolate(key, exc)
        return len(ready)

    def _isolate(self, key: selectors.SelectorKey, exc: Exception) -> None:
        """Contain a failed callback: its watch's error handler, else log and unwatch."""
        self.callback_errors += 1
        handler = self._on_error.get(key.fd)
        if handler is not None:
            try:
                handler(exc)
                return
            except Exception as second:
                exc = second
        log.error("reactor: callback for fd %d failed, no longer watched: %r", key.fd, exc)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(key.fileobj)
        self._on_error.pop(key.fd, None)

    def run_timers(self, now: float) -> None:
        """Run every timer due at ``now``."""
        timers = self._timers
        while timers and timers[0][0] <= now:
            _when, _seq, timer = heapq.heappop(timers)
            if not timer.cancelled:
                timer.cancelled = True
                try:
                    timer.callback()
                except Exception as exc:
                    self.callback_errors += 1
                    log.error("reactor: timer callback failed: %r", exc)

    def close(self) -> None:
        """Release the selector."""
        self._selector.close()
