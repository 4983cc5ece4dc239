"""Figures as PNG files (matplotlib's Agg backend: no display needed, safe under sudo)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

MODE_COLOURS = {
    "mrc": "tab:blue",
    "single": "tab:orange",
    "ecn_trim_on": "tab:green",
    "ecn_trim_off": "tab:red",
}


def goodput_over_time(
    path: Path,
    title: str,
    series: Mapping[str, Sequence[Mapping[str, float]]],
    markers: Mapping[str, float],
) -> None:
    """Goodput (Mbit/s) against time for each labelled series, with vertical ``markers``."""
    figure, axes = plt.subplots(figsize=(9, 4))
    for label, points in series.items():
        mode = label.split()[0]
        axes.plot(
            [p["t_s"] for p in points],
            [p["goodput_bps"] / 1e6 for p in points],
            label=label,
            color=MODE_COLOURS.get(mode),
            drawstyle="steps-pre",
            linewidth=1.2,
        )
    for name, at in markers.items():
        axes.axvline(at, color="grey", linestyle="--", linewidth=1)
        axes.annotate(
            name,
            (at, 1),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
        )
    axes.set_xlabel("time since the transfer started (s)")
    axes.set_ylabel("goodput (Mbit/s)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def grouped_bars(
    path: Path,
    title: str,
    ylabel: str,
    groups: Sequence[str],
    values: Mapping[str, Sequence[float]],
) -> None:
    """One bar per mode for each group (a flow, a link)."""
    figure, axes = plt.subplots(figsize=(max(6, 0.45 * len(groups) * len(values)), 4))
    width = 0.8 / max(1, len(values))
    for offset, (mode, heights) in enumerate(values.items()):
        axes.bar(
            [i + offset * width for i in range(len(groups))],
            heights,
            width=width,
            label=mode,
            color=MODE_COLOURS.get(mode),
        )
    axes.set_xticks([i + width * (len(values) - 1) / 2 for i in range(len(groups))])
    axes.set_xticklabels(groups, rotation=60, ha="right", fontsize=7)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def goodput_with_spans_and_durations(
    path: Path,
    title: str,
    series: Mapping[str, Sequence[Mapping[str, float]]],
    spans: Mapping[str, tuple[float, float]],
    durations: Mapping[str, float | None],
    duration_label: str,
) -> None:
    """Left: goodput (Mbit/s) over time per mode, each mode's ``spans`` (start, end) shaded
    in its colour; right: one bar per mode of ``durations`` (seconds; a missing one is
    written as such rather than drawn as 0)."""
    figure, (left, right) = plt.subplots(
        1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]}
    )
    for mode, points in series.items():
        colour = MODE_COLOURS.get(mode)
        left.plot(
            [p["t_s"] for p in points],
            [p["goodput_bps"] / 1e6 for p in points],
            label=mode,
            color=colour,
            drawstyle="steps-pre",
            linewidth=1.2,
        )
        if mode in spans:
            start, end = spans[mode]
            left.axvspan(start, end, color=colour, alpha=0.12, label=f"{mode}: incast")
    left.set_xlabel("time since the victim flow started (s)")
    left.set_ylabel("victim goodput (Mbit/s)")
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    modes = list(durations)
    heights = [durations[m] or 0.0 for m in modes]
    bars = right.bar(modes, heights, color=[MODE_COLOURS.get(m) for m in modes])
    right.bar_label(
        bars, labels=["n/a" if durations[m] is None else f"{durations[m]:.1f} s" for m in modes]
    )
    right.set_ylabel(duration_label)
    right.tick_params(axis="x", labelsize=7)
    right.grid(axis="y", alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
