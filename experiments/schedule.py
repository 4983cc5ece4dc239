"""A run's timeline of events, on a thread of its own while the run's transfers or job go on.

Each step waits for its moment, then acts: reads the counters, cuts a link, powers a switch
off, mends the fabric, starts a second job. Failover times its steps on the run's clock (the
cut at ``cut_at_s``), the collective experiment on the job's iterations (half an iteration
after the ``event_after``-th). :meth:`Schedule.finish`, once the run is over, ends the
timeline, waits for the jobs it started, mends whatever is still broken and waits until the
controller sees every link it broke up again: the next run starts on a whole fabric.

A step that raises stops the timeline; its error is kept (``error``) for the run's record,
and :meth:`Schedule.finish` still mends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from experiments.progress import event
from testbed.session import Testbed
from topologies.model import LinkId

log = logging.getLogger(__name__)

#: How long the controller gets to see a restored link up (and, before a run, every link).
RESTORE_SETTLE_TIMEOUT_S = 15.0
#: How often the timeline looks whether its next step is due.
TICK_S = 0.01


@dataclass(frozen=True)
class _Step:
    due: Callable[[], bool]
    act: Callable[[], None]


class Schedule:
    """A timeline of steps on ``testbed`` (see the module's docstring). ``on_mend`` is called
    as mending begins, whether a step or :meth:`finish` mends (failover notes the time)."""

    def __init__(
        self, testbed: Testbed, name: str, on_mend: Callable[[], None] | None = None
    ) -> None:
        self.testbed = testbed
        self._on_mend = on_mend
        self._steps: list[_Step] = []
        self._jobs: list[threading.Thread] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: The error of the step that stopped the timeline ("Type: message"), if one did.
        self.error: str | None = None
        #: The links broken: cut, or the powered-off switch's.
        self.links: list[LinkId] = []
        #: The switch powered off, if one was.
        self.switch: str | None = None
        #: Seconds from power on until the controller had reprogrammed the switch (bmv2).
        self.switch_back_s: float | None = None
        #: Links the controller did not see up again in time after the mend.
        self.problems: list[str] = []
        self._broken = False

    def at(self, due: Callable[[], bool], act: Callable[[], None]) -> None:
        """Add a step: ``act`` once ``due()`` holds, after the steps added before it."""
        self._steps.append(_Step(due, act))

    def start(self) -> None:
        self._thread.start()

    def cut_link(self, a: str, b: str) -> LinkId:
        """Cut the link between ``a`` and ``b`` (as ``Testbed.fail`` takes them)."""
        self._broken = True
        link = self.testbed.fail(a, b)
        self.links.append(link)
        event("%s cut", link)
        return link

    def power_off(self, switch: str, dark: bool) -> None:
        """Power ``switch`` off (``dark``: its links go dark, see ``Testbed.power_off``)."""
        self._broken = True
        self.switch = switch
        self.links = self.testbed.power_off(switch, dark=dark)
        event("%s powered off (%s)", switch, "links dark" if dark else "links lit")

    def mend(self) -> None:
        """Bring back what is broken: the switch powered on (and reprogrammed), or the links
        restored; nothing when nothing is broken."""
        if not self._broken:
            return
        self._broken = False
        if self._on_mend is not None:
            self._on_mend()
        if self.switch is not None:
            self.switch_back_s = self.testbed.power_on(self.switch, self.links)
            event("%s powered on (reprogrammed after %s s)", self.switch, self.switch_back_s)
            return
        for link in self.links:
            self.testbed.restore(str(link.a), str(link.b))
            event("%s restored", link)

    def start_job(self, name: str, job: Callable[[], None]) -> None:
        """Run ``job`` on a thread of its own (a second collective job); :meth:`finish` waits
        for it."""
        thread = threading.Thread(target=job, name=name, daemon=True)
        self._jobs.append(thread)
        thread.start()
        event("%s started", name)

    def finish(self) -> None:
        """The run is over: stop the timeline, wait for the jobs it started, mend whatever is
        still broken, and wait until the controller sees every link it tracks up again
        (``problems`` says which it did not)."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        for job in self._jobs:
            job.join()
        self.mend()
        for link in self.links:
            if not self.testbed.controller_tracks(link):
                continue  # a host link on bmv2: hosts answer no LLDP
            if (
                self.testbed.wait_link_state(link, down=False, timeout=RESTORE_SETTLE_TIMEOUT_S)
                is None
            ):
                self.problems.append(
                    f"the controller did not see {link} up {RESTORE_SETTLE_TIMEOUT_S:.0f} s "
                    "after the restore"
                )

    def _run(self) -> None:
        try:
            for step in self._steps:
                if not self._wait(step.due):
                    return
                step.act()
        except Exception as error:  # kept for the run's record; finish() still mends
            log.exception("%s", self._thread.name)
            self.error = f"{type(error).__name__}: {error}"

    def _wait(self, due: Callable[[], bool]) -> bool:
        """Wait until ``due()``; False when the run ended first."""
        while not self._done.is_set():
            if due():
                return True
            self._done.wait(TICK_S)
        return False
