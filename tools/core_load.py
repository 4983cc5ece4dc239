"""Was a bench's window CPU-bound? Each core's busy share over the window, and the verdict.

A bench's ratio compares two sides on this shared 2-core machine; when a core was saturated
while one of them ran, that side's figure is the machine's limit (or another job's load) as
much as the side's own. So the benches record, for every timed run, each core's busy share
over the run's window and a verdict, and their summaries put ``CPU-bound`` beside a ratio
whenever a run behind it had a saturated core.

The reading and the rule are the experiments' (:mod:`experiments.cpu`,
:mod:`experiments.bottleneck`), so a bench and an experiment call the same load by the same
word: a core is busy for every jiffy it ran something at normal priority or was stolen by the
hypervisor, and a run is ``CPU-bound`` when any core was busier than ``CPU_BOUND_SHARE``
averaged over its window. /proc/stat counts in jiffies (10 ms), so a window of a few tens of
milliseconds gives a coarse share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from experiments.bottleneck import CPU_BOUND, CPU_BOUND_SHARE
from experiments.cpu import CoreTimes, core_jiffies, core_load, core_times

#: The verdict of a run whose cores all stayed at or below ``CPU_BOUND_SHARE``.
NOT_CPU_BOUND = "no core saturated"
#: The verdict of a window shorter than one jiffy: /proc/stat barely moved, nothing was read.
UNREAD = "too short to read"


def verdict(busiest_core: float | None) -> str:
    """``CPU-bound`` when the busiest core's share is above ``CPU_BOUND_SHARE``."""
    if busiest_core is not None and busiest_core > CPU_BOUND_SHARE:
        return CPU_BOUND
    return NOT_CPU_BOUND


def window_load(
    start: Mapping[str, CoreTimes], end: Mapping[str, CoreTimes], digits: int = 3
) -> dict[str, Any]:
    """One window's record: its length in one core's jiffies, each core's busy and steal
    share, the busiest core, the verdict. A window shorter than one jiffy per core (a write run
    of a few milliseconds) has no shares and the verdict ``UNREAD``: shares of 0 would claim
    idle cores."""
    jiffies = core_jiffies(start, end)
    if jiffies < 1:
        return {
            "jiffies": round(jiffies, 1),
            "busy": {},
            "steal": {},
            "busiest_core": None,
            "verdict": UNREAD,
        }
    load = core_load(start, end)
    busiest = load["busiest_core"]
    return {
        "jiffies": round(jiffies, 1),
        "busy": {name: round(core["busy"], digits) for name, core in load["cores"].items()},
        "steal": {name: round(core["steal"], digits) for name, core in load["cores"].items()},
        "busiest_core": None if busiest is None else round(busiest, digits),
        "verdict": verdict(busiest),
    }


class CoreWindow:
    """``with CoreWindow() as window: ...``; afterwards ``window.load`` is the block's
    :func:`window_load` (also when the block raised)."""

    def __init__(self) -> None:
        self._start: dict[str, CoreTimes] = {}
        self.load: dict[str, Any] | None = None

    def __enter__(self) -> CoreWindow:
        self._start = core_times()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.load = window_load(self._start, core_times())


def overall(loads: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The verdict over the runs behind one figure: ``CPU-bound`` when any run was, with how
    many were, the busiest core seen, and the rule. A run with no record, or one too short to
    read, counts as unread."""
    runs = list(loads)
    read = [load for load in runs if load is not None and load["busiest_core"] is not None]
    cpu_bound = sum(1 for load in read if load["verdict"] == CPU_BOUND)
    busiest = [load["busiest_core"] for load in read if load["busiest_core"] is not None]
    return {
        "verdict": CPU_BOUND if cpu_bound else NOT_CPU_BOUND,
        "runs": len(runs),
        "cpu_bound_runs": cpu_bound,
        "unread_runs": len(runs) - len(read),
        "busiest_core_max": max(busiest) if busiest else None,
        "rule": f"{CPU_BOUND} when any core was more than {CPU_BOUND_SHARE * 100:.0f} % busy "
        "averaged over a run's window",
    }


def beside(value: float | None, bottleneck: Mapping[str, Any], unit: str = "") -> str:
    """A bench's figure (a ratio, or a time with its ``unit``) in words with its verdict
    beside it, for the bench's summary line."""
    figure = "no figure" if value is None else f"{value:g}{' ' + unit if unit else ''}"
    busiest = bottleneck["busiest_core_max"]
    core = "unread" if busiest is None else f"{busiest * 100:.0f} %"
    if bottleneck["verdict"] == CPU_BOUND:
        return (
            f"{figure}, {CPU_BOUND} ({bottleneck['cpu_bound_runs']} of {bottleneck['runs']} "
            f"runs had a core above {CPU_BOUND_SHARE * 100:.0f} % busy; busiest {core})"
        )
    return f"{figure} ({NOT_CPU_BOUND}: busiest core {core})"
