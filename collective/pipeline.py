"""The order in which a rank works through one iteration of its plan, each step cut into slices.

Without slices a ring runs in lockstep: a rank posts step k+1 only once the whole of step k
has arrived and been reduced, so its link idles from the end of its own step-k WRITE until
the slowest piece of its neighbour's has landed. NCCL cuts each step into slices and moves
slice j of step k+1 as soon as slice j of step k is in; the next slice travels while the last
is reduced. Here the dependency is the same and nothing else is: slice j of step k+1 may be
posted once slice j of step k arrived and was reduced (``Step.sliced`` makes the slices touch
disjoint bytes, so that is the only order the data asks for). Slices do not wait for one
another; each round posts every slice's next step in slice order, so what a rank has ready
goes out oldest step first, as through NCCL's FIFO.

An iteration still ends as a whole: ``finished`` once every slice has passed the last step;
the rank then drains its WRITEs before the next iteration (``collective.rank``). With one
slice this is the step-by-step order of a plan without slices.

Plain state, no I/O: the rank asks what to post and tells what arrived; tests drive it alone.
"""

from __future__ import annotations

#: (step, slice): one slice of one step, the unit the pipeline posts and completes.
Unit = tuple[int, int]


class Pipeline:
    """Which (step, slice) units a rank may post and which it waits for, in one iteration."""

    def __init__(self, steps: int, slices: int) -> None:
        if steps < 1 or slices < 1:
            raise ValueError(f"a pipeline needs steps >= 1 and slices >= 1, got {steps}, {slices}")
        self.steps = steps
        self.slices = slices
        #: The step each slice is at (``steps`` once it passed the last one).
        self._at = [0] * slices
        #: Whether each slice's current step has its sends posted.
        self._posted = [False] * slices

    def restart(self) -> None:
        """A new iteration: every slice at step 0, nothing posted."""
        self._at = [0] * self.slices
        self._posted = [False] * self.slices

    def at(self, index: int) -> int:
        """The step slice ``index`` is at (``steps`` when it is through)."""
        return self._at[index]

    @property
    def finished(self) -> bool:
        """Every slice passed the last step."""
        return all(step == self.steps for step in self._at)

    def to_post(self) -> list[Unit]:
        """The units whose sends may go now, in slice order, marked posted: each slice's
        current step, once (its previous step completed, or it is step 0)."""
        ready = []
        for index, step in enumerate(self._at):
            if step < self.steps and not self._posted[index]:
                self._posted[index] = True
                ready.append((step, index))
        return ready

    def waiting(self) -> list[Unit]:
        """The posted units whose arrivals are still awaited, in slice order."""
        return [
            (step, index)
            for index, step in enumerate(self._at)
            if step < self.steps and self._posted[index]
        ]

    def complete(self, unit: Unit) -> None:
        """``unit`` arrived and was reduced: its slice moves to the next step (whose sends
        ``to_post`` then offers). ValueError for a unit that is not awaited: completing one
        twice or out of its slice's order would reduce a chunk twice or miss one."""
        step, index = unit
        if not (0 <= index < self.slices and self._at[index] == step and self._posted[index]):
            raise ValueError(f"unit (step {step}, slice {index}) is not awaited")
        self._at[index] = step + 1
        self._posted[index] = False
