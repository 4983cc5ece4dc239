"""How long a sequence of steps has left, from what the parameters say and what was measured.

A step (a run, a bench's measurement) may have a planned length (its transfer's
``duration_s``); what it really takes is that plus an overhead the parameters do not know
(agents starting, a result arriving, counters read), so once steps have ended every planned
step left is expected to take its plan plus the mean overhead of those measured, and a step
without a plan the mean length of those measured. Setups (an experiment's bring-ups: fabric,
controller, agents, and their teardown) cost what no step's plan says and come only a few
times, so they are counted apart: each setup left is expected to cost what the ended ones cost
on average, or, before one has ended, what the current one has cost so far.

Nothing here reads a clock: every method takes ``now``, so tests drive it with numbers.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Left:
    """The time left, in seconds; ``at_least`` while no step has ended (only the plans are
    known, and the overhead above them is not)."""

    seconds: float
    at_least: bool


class Estimate:
    """The time left of ``planned`` steps (each its planned seconds, or None) run in order,
    with ``setups`` setups among them (see the module's docstring)."""

    def __init__(self, planned: Sequence[float | None], setups: int = 0) -> None:
        self.planned = tuple(planned)
        self.setups = setups
        self._took: dict[int, float] = {}
        self._current: tuple[int, float] | None = None
        self._setup_costs: list[float] = []
        self._setups_begun = 0
        self._setup_start: float | None = None
        self._steps_in_setup = 0.0

    @property
    def done(self) -> int:
        """Steps ended."""
        return len(self._took)

    def took(self, index: int) -> float | None:
        """Seconds step ``index`` took (None: it has not ended)."""
        return self._took.get(index)

    def step_began(self, index: int, now: float) -> None:
        self._current = (index, now)

    def step_ended(self, index: int, now: float) -> float:
        """Step ``index`` ended at ``now``; the seconds it took."""
        began = self._current[1] if self._current and self._current[0] == index else now
        self._current = None
        took = now - began
        self._took[index] = took
        self._steps_in_setup += took
        return took

    def setup_began(self, now: float) -> None:
        self._setups_begun += 1
        self._setup_start = now
        self._steps_in_setup = 0.0

    def setup_ended(self, now: float) -> None:
        """The current setup is torn down: its cost is its time less its steps'."""
        if self._setup_start is not None:
            self._setup_costs.append(self._setup_cost_so_far(now))
        self._setup_start = None

    def current_step_s(self, now: float) -> float | None:
        """Seconds the current step has been running (None: none is)."""
        return None if self._current is None else now - self._current[1]

    def left(self, now: float) -> Left | None:
        """The time left at ``now``; None while a step has neither a plan nor a measured
        step to go by."""
        steps = 0.0
        for index in range(len(self.planned)):
            if index in self._took:
                continue
            expected = self._expected(index)
            if expected is None:
                return None
            if self._current is not None and self._current[0] == index:
                expected = max(0.0, expected - (now - self._current[1]))
            steps += expected
        return Left(steps + self._setups_left(now), at_least=not self._took)

    def _expected(self, index: int) -> float | None:
        """What step ``index`` is expected to take (see the module's docstring)."""
        plan = self.planned[index]
        measured = [(self.planned[i], took) for i, took in self._took.items()]
        overheads = [took - p for p, took in measured if p is not None]
        if plan is not None and overheads:
            return max(0.0, plan + statistics.fmean(overheads))
        if measured:
            return statistics.fmean(took for _, took in measured)
        return plan

    def _setups_left(self, now: float) -> float:
        """What the setups not yet ended are expected to cost."""
        running = self._setup_start is not None
        so_far = self._setup_cost_so_far(now) if running else 0.0
        if self._setup_costs:
            each = statistics.fmean(self._setup_costs)
        elif running:
            each = so_far  # a lower bound: this setup's teardown is still to come
        else:
            each = 0.0
        not_begun = max(0, self.setups - self._setups_begun)
        return not_begun * each + (max(0.0, each - so_far) if running else 0.0)

    def _setup_cost_so_far(self, now: float) -> float:
        """The current setup's time so far, less its steps' (the running one's included)."""
        assert self._setup_start is not None
        running = self.current_step_s(now) or 0.0
        return max(0.0, now - self._setup_start - self._steps_in_setup - running)
