"""Progress of a long job of steps (an experiment's runs, a bench's measurements), told as it
goes on standard error, never on standard output, where the summaries and JSON go.

Lines (:mod:`experiments.progress.text`): the plan as it starts, each step's start and end
(with its time, its key figure, the count done and the time left), a heartbeat after
``heartbeat_s`` with no line (a bring-up or a long run still going), and the count at the
end; at ``-v`` also the events inside a run (:mod:`experiments.progress.events`). On a
terminal a live bar (:mod:`experiments.progress.bar`) shows the time left as well, and
the lines scroll above it; elsewhere (CI, ``tee``, a pipe) the lines are plain.

    display = Display(verbose=True)
    with track(display, "loss", [Step("mrc@0% seed 0", 10.0), ...], setups=1) as progress:
        progress.step_began(0)
        ...
        progress.step_ended(0, "goodput 812.345 Mbit/s")

A job run without a display (``track(None, ...)``) says nothing: the same calls, no output.
Nor does one whose stream has gone (``| head`` ended): a progress line is never worth a run.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

from experiments.progress import text
from experiments.progress.bar import LiveBar
from experiments.progress.estimate import Estimate, Left
from experiments.progress.events import EVENTS

#: With no line for this long, a heartbeat line says what is still going on.
HEARTBEAT_S = 30.0
#: How often the ticker looks whether a heartbeat is due (and moves the bar's time left).
TICK_S = 1.0


@dataclass(frozen=True)
class Step:
    """One step: its label in the lines (``mrc@1% seed 0``) and the seconds the parameters
    give it (None: they do not say; see :mod:`experiments.progress.estimate`)."""

    label: str
    planned_s: float | None = None


@dataclass(frozen=True)
class Display:
    """Where and how progress is shown: the stream (standard error), whether events are
    (``verbose``), whether the live bar is drawn (None: where the stream is a terminal),
    the clock, the silence before a heartbeat, and the ticker's period (None: no ticker
    thread; tests call :meth:`Progress.tick` themselves)."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    verbose: bool = False
    live: bool | None = None
    clock: Callable[[], float] = time.monotonic
    heartbeat_s: float = HEARTBEAT_S
    tick_s: float | None = TICK_S


def track(
    display: Display | None,
    title: str,
    steps: Sequence[Step],
    setups: int = 0,
    unit: str = "runs",
) -> Progress:
    """The progress of ``steps`` on ``display``, or a silent one (None)."""
    return Progress(display, title, steps, setups, unit)


class Progress:
    """One job's progress, for a ``with`` block (see the module's docstring). Its methods
    may be called from any thread."""

    def __init__(
        self,
        display: Display | None,
        title: str,
        steps: Sequence[Step],
        setups: int = 0,
        unit: str = "runs",
    ) -> None:
        self.display = display
        self.title = title
        self.steps = tuple(steps)
        self.unit = unit
        self.clock = display.clock if display is not None else time.monotonic
        self.estimate = Estimate([step.planned_s for step in self.steps], setups)
        self._lock = threading.RLock()
        self._started = self.clock()
        self._last_line = self._started
        self._current: int | None = None
        #: What is going on between steps (a bring-up, a teardown) and since when.
        self._between: tuple[str, float] | None = None
        self._bar: LiveBar | None = None
        self._handler: _EventHandler | None = None
        self._gone = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- the job's side -------------------------------------------------------------------
    def __enter__(self) -> Progress:
        display = self.display
        if display is None:
            return self
        self._started = self._last_line = self.clock()
        if display.live if display.live is not None else display.stream.isatty():
            self._bar = LiveBar(display.stream, len(self.steps))
            self._bar.start()
        if display.verbose:
            self._handler = _EventHandler(self)
            self._handler.attach()
        setups = self.estimate.setups
        self._say(text.plan_line(self.title, len(self.steps), self.unit, setups, self._left()))
        self._show()
        if display.tick_s is not None:
            self._ticker = threading.Thread(target=self._tick_loop, name="progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.display is None:
            return
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._handler is not None:
            self._handler.detach()
        ended = ""
        if kind is KeyboardInterrupt:
            ended = "interrupted"
        elif error is not None:
            ended = f"stopped by {kind.__name__ if kind else 'an error'}"
        done, total = self.estimate.done, len(self.steps)
        line = text.final_line(self.title, done, total, self.unit, self._elapsed(), ended)
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._say(line)

    def setup_began(self, what: str) -> None:
        """A bring-up begins (``what`` says which, at ``-v``)."""
        with self._lock:
            self.estimate.setup_began(self.clock())
            self._between = (what, self.clock())
            self.note(what)
            self._show()

    def setup_ready(self, what: str) -> None:
        """The bring-up is up (``what`` says so, with how long it took, at ``-v``)."""
        with self._lock:
            since = self._between[1] if self._between else self.clock()
            self._between = None
            self.note(f"{what} in {text.duration(self.clock() - since)}")

    def setup_ended(self, what: str) -> None:
        """The bring-up is torn down (``what`` says what was left, at ``-v``)."""
        with self._lock:
            self.estimate.setup_ended(self.clock())
            self._between = None
            self.note(what)

    def now_doing(self, what: str) -> None:
        """Something between steps begins (a teardown): the heartbeat names it, ``-v`` too."""
        with self._lock:
            self._between = (what, self.clock())
            self.note(what)
            self._show()

    def step_began(self, index: int) -> None:
        with self._lock:
            self.estimate.step_began(index, self.clock())
            self._current = index
            self._between = None
            label = self.steps[index].label
            self._say(text.started_line(self.title, index, len(self.steps), label))
            self._show()

    def step_ended(self, index: int, figure: str) -> None:
        """Step ``index`` ended; ``figure`` is its key figure (or its failure)."""
        with self._lock:
            took = self.estimate.step_ended(index, self.clock())
            self._current = None
            label = f"after {text.place(index, len(self.steps))} {self.steps[index].label}"
            self._between = (label, self.clock())
            line = text.ended_line(
                self.title,
                index,
                len(self.steps),
                self.steps[index].label,
                took,
                figure,
                self.estimate.done,
                self._left(),
            )
            self._say(line)
            self._show()

    def note(self, message: str) -> None:
        """An event (at ``-v``; nothing otherwise), placed in the step it came in."""
        if self.display is None or not self.display.verbose:
            return
        with self._lock:
            where = ""
            if self._current is not None:
                index = self._current
                into = self.estimate.current_step_s(self.clock()) or 0.0
                where = (
                    f"{text.place(index, len(self.steps))} {self.steps[index].label} +{into:.1f} s"
                )
            self._say(text.event_line(self.title, where, message))

    # -- the ticker's side ----------------------------------------------------------------
    def tick(self) -> None:
        """Move the bar's time left; in plain lines, say what is still going on after
        ``heartbeat_s`` without a line."""
        if self.display is None:
            return
        with self._lock:
            now = self.clock()
            if self._bar is not None:
                self._show()
                return
            if now - self._last_line < self.display.heartbeat_s:
                return
            doing, since = self._doing(now)
            line = text.still_line(
                self.title, doing, now - since, self.estimate.done, len(self.steps), self._left()
            )
            self._say(line)

    def _tick_loop(self) -> None:
        assert self.display is not None and self.display.tick_s is not None
        while not self._stop.wait(self.display.tick_s):
            self.tick()

    # -- output ---------------------------------------------------------------------------
    def _doing(self, now: float) -> tuple[str, float]:
        """What is going on at ``now`` and since when: the current step, a bring-up, or
        the time between steps (a teardown, the summary)."""
        if self._current is not None:
            index = self._current
            label = f"{text.place(index, len(self.steps))} {self.steps[index].label}"
            return label, now - (self.estimate.current_step_s(now) or 0.0)
        if self._between is not None:
            return self._between
        return "starting", self._started

    def _left(self) -> Left | None:
        return self.estimate.left(self.clock())

    def _elapsed(self) -> float:
        return self.clock() - self._started

    def _say(self, line: str) -> None:
        if self.display is None:
            return
        with self._lock:
            self._last_line = self.clock()
            if self._bar is not None:
                self._bar.print(line)
                return
            if self._gone:
                return
            try:
                self.display.stream.write(line + "\n")
                self.display.stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: the run goes on unheard
                self._gone = True

    def _show(self) -> None:
        if self._bar is None:
            return
        doing, _ = self._doing(self.clock())
        self._bar.show(f"{self.title} {doing}", self.estimate.done, text.time_left(self._left()))


class _EventHandler(logging.Handler):
    """Hands :data:`~experiments.progress.events.EVENTS` to a progress while it is shown,
    instead of to the root logger (whose lines would say the same without the run's place)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self.progress = progress
        self._saved = (EVENTS.level, EVENTS.propagate)

    def attach(self) -> None:
        self._saved = (EVENTS.level, EVENTS.propagate)
        EVENTS.setLevel(logging.INFO)
        EVENTS.propagate = False
        EVENTS.addHandler(self)

    def detach(self) -> None:
        EVENTS.removeHandler(self)
        EVENTS.setLevel(self._saved[0])
        EVENTS.propagate = self._saved[1]

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.progress.note(record.getMessage())
        except Exception:  # a progress line is never worth a run
            self.handleError(record)
