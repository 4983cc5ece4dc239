"""What a failover (or a restoration) took: from the first lost probe to the last write.

The controller cannot see the moment a cable is cut; the send time of the first probe that went
missing is the closest it can know (the cut happened at that moment or before it). The total
therefore covers detection (missed probes) and programming (recompute, diff, write on every
switch that changed).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failover:
    """One reaction to link changes, with its timing on the monotonic clock."""

    #: The link changes that triggered it, e.g. "l1:3<->s1:1 down".
    trigger: tuple[str, ...]
    #: Estimated start: the first missed probe's send time (down) or the recovery (up).
    started_at: float
    detected_at: float
    programmed_at: float
    #: Switches whose intent changed and were programmed.
    switches: tuple[str, ...]
    writes: int
    #: False when a switch could not be programmed (its failure is logged on its own).
    complete: bool
    #: Which reaction this is (``controller.intent.policy``): ``reactive``, the whole fabric at
    #: once; ``local``, each switch pruning its own dead next hops (``static``, and the first
    #: step of ``converge``); ``converged``, ``converge``'s recomputation after its delay, whose
    #: programming time includes that delay.
    phase: str = "reactive"

    @property
    def detection_ms(self) -> float:
        """From the estimated start to the controller noticing."""
        return (self.detected_at - self.started_at) * 1000

    @property
    def programming_ms(self) -> float:
        """From noticing to the last write acknowledged."""
        return (self.programmed_at - self.detected_at) * 1000

    @property
    def duration_ms(self) -> float:
        """The whole reaction: detection plus programming."""
        return (self.programmed_at - self.started_at) * 1000

    def to_json(self) -> dict[str, object]:
        """The record as JSON-ready data (durations rounded to microseconds)."""
        return {
            "trigger": list(self.trigger),
            "switches": list(self.switches),
            "writes": self.writes,
            "complete": self.complete,
            "phase": self.phase,
            "detection_ms": round(self.detection_ms, 3),
            "programming_ms": round(self.programming_ms, 3),
            "duration_ms": round(self.duration_ms, 3),
        }
