"""Which RoCE an MRC figure is held against: the strongest contender for each measure.

A ratio against a RoCE nobody runs proves little, so every summary that compares MRC with
RoCE finds, measure by measure, the RoCE contender that did best (``roce:adaptive`` on goodput
under loss, perhaps ``roce:nccl`` on surviving a cut) and gives MRC's ratio to that one; the
ratios to the others stay in the summary beside it. Pure: the caller gives each contender's
value over seeds (its mean), and says whether more is better.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from experiments.transports import is_roce


@dataclass(frozen=True)
class AgainstStrongest:
    """One measure: the strongest RoCE contender and its value, MRC's value, and MRC's value
    over the strongest's (None when either is unknown or the strongest's is 0); ``better``
    says which way the measure improves (``higher`` or ``lower``)."""

    measure: str
    better: str
    strongest: str | None
    strongest_value: float | None
    mrc: str
    mrc_value: float | None
    mrc_over_strongest: float | None
    #: Every RoCE contender's value, best first.
    roce_values: tuple[tuple[str, float | None], ...]

    def line(self, unit: str = "", scale: float = 1.0) -> str:
        """One summary.txt line."""
        if self.strongest is None:
            return f"{self.measure}: no RoCE contender gave a value ({self.better} is better)"
        ratio = "-" if self.mrc_over_strongest is None else f"{self.mrc_over_strongest:.2f}"
        others = ", ".join(
            f"{label} {_scaled(value, scale)}" for label, value in self.roce_values[1:]
        )
        return (
            f"{self.measure} ({self.better} is better): strongest RoCE {self.strongest} "
            f"{_scaled(self.strongest_value, scale)}{unit}, {self.mrc} "
            f"{_scaled(self.mrc_value, scale)}{unit}, {self.mrc} / strongest {ratio}"
            + (f" (others: {others})" if others else "")
        )


def against_strongest(
    measure: str,
    values: Mapping[str, float | None],
    *,
    higher_is_better: bool,
    mrc: str = "mrc",
) -> AgainstStrongest:
    """``values`` (contender label -> its value, None when it gave none): the RoCE contender
    with the best value, and MRC's ratio to it."""
    roce = [(label, value) for label, value in values.items() if is_roce(label)]
    known = [(label, value) for label, value in roce if value is not None]
    known.sort(key=lambda item: item[1], reverse=higher_is_better)
    ordered = tuple(known) + tuple((label, value) for label, value in roce if value is None)
    strongest, strongest_value = known[0] if known else (None, None)
    mrc_value = values.get(mrc)
    ratio = (
        mrc_value / strongest_value
        if mrc_value is not None and strongest_value is not None and strongest_value != 0
        else None
    )
    return AgainstStrongest(
        measure=measure,
        better="higher" if higher_is_better else "lower",
        strongest=strongest,
        strongest_value=strongest_value,
        mrc=mrc,
        mrc_value=mrc_value,
        mrc_over_strongest=ratio,
        roce_values=ordered,
    )


def _scaled(value: float | None, scale: float) -> str:
    return "-" if value is None else f"{value * scale:.3g}"
