"""Counter-balanced comparisons for the benches: which side runs first in each repeat, and what
the repeats' pairs say together.

This machine's speed drifts within minutes (other jobs, the hypervisor taking a core: see
docs/performance.md). A bench that always runs the same side first hands that drift to one side,
and a comparison of two sides measured minutes apart measures the drift as much as the sides.
So every bench here runs its sides back to back within a repeat and swaps which goes first from
one repeat to the next: over repeats 0, 1, 2, 3 the runs go A B, B A, A B, B A (the ABBA
pattern), and a drift that is linear in time weighs on both sides alike over every two repeats.

Each repeat yields one pair, and its ratio is measured under one machine state; the headline
is the median of those paired ratios, reported with their spread and with the median ratio by
which side went first (a large difference between the two says the order, i.e. the drift,
still shows through). Pure functions over plain data, so the unit tests pin them.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def ordered(sides: Sequence[T], repeat: int) -> list[T]:
    """The sides in the order repeat ``repeat`` runs them: as given on even repeats, reversed
    on odd ones. With two sides, consecutive repeats run A B B A A B ...; with more, every
    side's mean position over two repeats is the same."""
    if repeat < 0:
        raise ValueError(f"repeat {repeat} is negative")
    return list(sides) if repeat % 2 == 0 else list(reversed(sides))


def spread(values: Sequence[float], digits: int = 3) -> dict[str, float | int | None]:
    """``n``, ``min``, ``median``, ``max`` and ``mean`` of ``values`` (None for each figure
    when there are none), rounded to ``digits``."""
    if not values:
        return {"n": 0, "min": None, "median": None, "max": None, "mean": None}
    return {
        "n": len(values),
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
        "mean": round(statistics.fmean(values), digits),
    }


def paired_summary(
    repeats: Sequence[Mapping[str, Any]],
    numerator: str,
    denominator: str,
    digits: int = 3,
) -> dict[str, Any]:
    """What a list of repeats says about ``numerator`` / ``denominator``.

    Each repeat is a mapping with ``order`` (the sides in the order they ran) and one number per
    side under the side's name. Returned: every repeat's pair with its ratio (``pairs``), the
    ratio's spread over the pairs (``ratio``; its ``median`` is the headline), each side's
    spread, and the median ratio of the repeats where each side went first
    (``ratio_median_by_first``). A pair whose denominator is 0 has no ratio (None) and is left
    out of the ratio's spread.
    """
    pairs: list[dict[str, Any]] = []
    by_first: dict[str, list[float]] = {numerator: [], denominator: []}
    for index, repeat in enumerate(repeats):
        order = list(repeat["order"])
        if sorted(order) != sorted((numerator, denominator)):
            raise ValueError(f"repeat {index}: order {order} is not {numerator} and {denominator}")
        top, bottom = float(repeat[numerator]), float(repeat[denominator])
        ratio = top / bottom if bottom else None
        pairs.append(
            {
                "repeat": index,
                "order": order,
                numerator: round(top, digits),
                denominator: round(bottom, digits),
                "ratio": None if ratio is None else round(ratio, digits),
            }
        )
        if ratio is not None:
            by_first[order[0]].append(ratio)
    ratios = [pair["ratio"] for pair in pairs if pair["ratio"] is not None]
    return {
        "pairs": pairs,
        "ratio": spread(ratios, digits),
        numerator: spread([float(r[numerator]) for r in repeats], digits),
        denominator: spread([float(r[denominator]) for r in repeats], digits),
        "ratio_median_by_first": {
            side: round(statistics.median(values), digits) if values else None
            for side, values in by_first.items()
        },
    }


def interleaved(sides: Sequence[T], repeats: int) -> list[tuple[int, T]]:
    """Every (repeat, side) run in the order to make them: each repeat runs every side, in
    :func:`ordered`'s order, before the next repeat starts."""
    return [(repeat, side) for repeat in range(repeats) for side in ordered(sides, repeat)]


def blocks(schedule: Sequence[tuple[int, T]]) -> list[tuple[T, list[int]]]:
    """Consecutive runs of one side grouped: [(side, [repeat, ...]), ...] in schedule order.

    An interleaved schedule of two sides runs A B B A A B ..., so adjacent runs of one side can
    share a setup (one network bring-up for two seeds) without losing the interleaving."""
    grouped: list[tuple[T, list[int]]] = []
    for repeat, side in schedule:
        if grouped and grouped[-1][0] == side:
            grouped[-1][1].append(repeat)
        else:
            grouped.append((side, [repeat]))
    return grouped
