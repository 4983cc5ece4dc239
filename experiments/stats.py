"""A figure over several seeds: its mean never travels without its spread.

One seed of a testbed run on a shared 2-core machine is one draw from a wide distribution
(recovery times of the same build have ranged over a factor of ten), so every figure a summary
gives over seeds comes as ``<name>_mean`` with ``<name>_min``, ``<name>_max``,
``<name>_stdev`` and ``<name>_seeds`` (how many seeds gave a value) beside it, and summary.txt
writes it as "mean (min-max) over N seeds", the form README quotes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: The keys that must stand beside every ``<name>_mean`` of a summary's figures.
SPREAD_SUFFIXES = ("_min", "_max", "_stdev", "_seeds")


def spread(name: str, values: Iterable[float | None]) -> dict[str, float | int | None]:
    """``<name>_mean``, ``_min``, ``_max``, ``_stdev`` (sample; None below two values) and
    ``_seeds`` (the values that were not None) of ``values``; the figures are None when no
    seed gave a value."""
    known = [float(v) for v in values if v is not None]
    return {
        f"{name}_mean": statistics.fmean(known) if known else None,
        f"{name}_min": min(known) if known else None,
        f"{name}_max": max(known) if known else None,
        f"{name}_stdev": statistics.stdev(known) if len(known) > 1 else None,
        f"{name}_seeds": len(known),
    }


def spread_problems(figures: Mapping[str, Any], path: str = "figures") -> list[str]:
    """Every ``<name>_mean`` in ``figures`` (nested dicts included) that lacks its spread."""
    problems = []
    for key, value in figures.items():
        if isinstance(value, Mapping):
            problems.extend(spread_problems(value, f"{path}.{key}"))
        elif key.endswith("_mean"):
            name = key.removesuffix("_mean")
            missing = [name + s for s in SPREAD_SUFFIXES if name + s not in figures]
            if missing:
                problems.append(f"{path}.{key} has no spread beside it: lacks {missing}")
    return problems


def describe(
    figures: Mapping[str, Any],
    name: str,
    show: Callable[[float], str],
    total_seeds: int,
    unit: str = "",
) -> str:
    """``name``'s figures as "mean unit (min-max) over N seeds", each number written by
    ``show`` ("-" when no seed gave a value; "of M" when some seeds gave none)."""
    mean = figures.get(f"{name}_mean")
    if mean is None:
        return f"- (no value in {total_seeds} seed(s))"
    seeds = int(figures[f"{name}_seeds"])
    unit = f" {unit}" if unit else ""
    if seeds == 1:
        return f"{show(mean)}{unit} (1 seed{'' if total_seeds == 1 else f' of {total_seeds}'})"
    over = f"{seeds} seeds" + ("" if seeds == total_seeds else f" of {total_seeds}")
    low, high = show(figures[f"{name}_min"]), show(figures[f"{name}_max"])
    return f"{show(mean)}{unit} ({low}-{high}) over {over}"


def seed_pairs(
    runs: Mapping[str, Mapping[str, Mapping[str, Any]]],
    values: Mapping[str, Callable[[Mapping[str, Any]], Any]],
) -> list[dict[str, Any]]:
    """Each seed's runs side by side: the seed, its modes in the order they ran (by each
    record's ``sequence``), and for every name in ``values`` that value of each mode's run;
    seeds that not every mode has are left out."""
    modes = list(runs)
    if not modes:
        return []
    seeds = sorted(set.intersection(*(set(runs[mode]) for mode in modes)), key=int)
    pairs = []
    for seed in seeds:
        order = sorted(modes, key=lambda mode: int(runs[mode][seed].get("sequence", 0)))
        entry: dict[str, Any] = {"seed": seed, "order": order}
        for name, value in values.items():
            entry[name] = {mode: value(runs[mode][seed]) for mode in modes}
        pairs.append(entry)
    return pairs


def mbit(bps: float) -> str:
    """Bits per second as summary.txt writes them: Mbit/s, three decimals."""
    return f"{bps / 1e6:.3f}"


def two_places(value: float) -> str:
    """A ratio or a time in seconds as summary.txt writes it."""
    return f"{value:.2f}"


def three_places(value: float) -> str:
    """A retention as summary.txt writes it."""
    return f"{value:.3f}"
