"""Lines that say what the run's controllers do as it happens: one dies, a backup becomes
primary, a restarted one rejoins (as backup, or taking over), none is left.

:func:`describe` compares two moments (``testbed.controllers.ControllerState`` per
controller) and is pure, so its wording is tested without processes; :class:`ControllerWatch`
polls the controllers in a thread and hands each line to a callback (the CLI prints it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from testbed.controllers import PRIMARY, Controllers, ControllerState, unmanaged_line

#: How often the watch looks; a takeover is reported within this of the log saying so.
POLL_INTERVAL_S = 0.2


def describe(
    before: Mapping[str, ControllerState],
    after: Mapping[str, ControllerState],
    switches: frozenset[str],
    arbitrated: bool = True,
    settled: Mapping[str, tuple[int | None, str]] | None = None,
) -> list[str]:
    """What changed between ``before`` and ``after``, one line each (none if nothing did).

    ``settled`` is each controller's last whole stance (see :func:`settle`), with its pid: a
    look that caught it ``connecting`` (a takeover half done) says nothing, so the next one
    words the change from the stance before that, not from ``connecting``.
    """
    lines: list[str] = []
    for name, now in after.items():
        then = before.get(name)
        old = then.stance(switches) if then is not None else "dead"
        if old == "connecting" and settled is not None and name in settled:
            pid, stance = settled[name]
            if pid == now.pid:  # a stance of an earlier life does not count
                old = stance
        new = now.stance(switches)
        restarted = then is not None and now.alive and now.pid != then.pid
        if new == old and not restarted:
            continue
        if restarted:
            old = "dead"  # what it was in its previous life does not count
        if new == "dead":
            lines.append(f"controller {name} (pid {now.pid}) died")
        elif new == "connecting":
            if restarted:  # else: half-way through a takeover, said once it is whole
                lines.append(f"controller {name} restarted (pid {now.pid})")
        elif new == PRIMARY:
            lines.append(_became_primary(name, old, restarted))
        elif new == "backup":
            lines.append(_became_backup(name, old, restarted, arbitrated))
    was_managed = any(state.alive for state in before.values())
    if was_managed and not any(state.alive for state in after.values()):
        lines.append(unmanaged_line())
    return lines


def settle(
    settled: Mapping[str, tuple[int | None, str]],
    after: Mapping[str, ControllerState],
    switches: frozenset[str],
) -> dict[str, tuple[int | None, str]]:
    """``settled`` updated with ``after``: each controller's pid and last stance that was not
    ``connecting`` (a restarted one still connecting has none yet)."""
    updated = dict(settled)
    for name, now in after.items():
        stance = now.stance(switches)
        if stance != "connecting":
            updated[name] = (now.pid, stance)
        elif name in updated and updated[name][0] != now.pid:
            del updated[name]
    return updated


def _became_primary(name: str, old: str, restarted: bool) -> str:
    if old == "backup":
        return f"controller {name} took over: primary on every switch"
    if restarted or old in ("dead", "connecting"):
        return f"controller {name} rejoined as primary on every switch"
    return f"controller {name} is primary on every switch"


def _became_backup(name: str, old: str, restarted: bool, arbitrated: bool) -> str:
    why = "by election id" if arbitrated else "the other holds the lock"
    if old == PRIMARY:
        return f"controller {name} is backup now: the other took over ({why})"
    if restarted or old in ("dead", "connecting"):
        return f"controller {name} rejoined as backup ({why})"
    return f"controller {name} is backup on every switch"


class ControllerWatch:
    """Polls ``controllers`` in a daemon thread; ``say`` gets each line of :func:`describe`."""

    def __init__(
        self,
        controllers: Controllers,
        say: Callable[[str], None],
        interval: float = POLL_INTERVAL_S,
    ) -> None:
        self._controllers = controllers
        self._say = say
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="controller-watch", daemon=True)
        #: The thread and a command that changed the controllers (``say_now``) both look.
        self._looking = threading.Lock()
        self._last = controllers.states()
        #: Each controller's last whole stance, which a ``connecting`` look does not replace.
        self._settled = settle({}, self._last, controllers.switches)

    def __enter__(self) -> ControllerWatch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5 * self._interval + 1)

    def poll(self) -> list[str]:
        """Look once; the lines for what changed since the last look."""
        with self._looking:
            now = self._controllers.states()
            switches, arbitrated = self._controllers.switches, self._controllers.arbitrated
            lines = describe(self._last, now, switches, arbitrated, self._settled)
            self._last = now
            self._settled = settle(self._settled, now, switches)
        return lines

    def say_now(self) -> None:
        """Look at once and say what changed: a command that killed or restarted a
        controller has its lines right after its answer, however soon the next command comes."""
        for line in self.poll():
            self._say(line)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                lines = self.poll()
            except Exception as error:  # a watch that fails must never end the run
                lines = [f"controller watch: {error}"]
                time.sleep(self._interval)
            for line in lines:
                self._say(line)
