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
    "roce": "tab:purple",
    "roce:perftest": "tab:purple",
    "roce:nccl": "tab:brown",
    "roce:adaptive": "tab:pink",
    "ecn_trim_on": "tab:green",
    "ecn_trim_off": "tab:red",
}


#: How the variants of one contender (``roce:perftest:t10``, ``roce:adaptive:16qp``), which
#: share its colour, are told apart, in the order they are drawn.
VARIANT_DASHES = ("--", ":", "-.")
VARIANT_HATCHES = ("//", "..", "xx")


def _first_word(label: str) -> str:
    """What names the mode or contender in a label (``mrc (256 EVs)`` -> ``mrc``)."""
    words = label.split()
    return words[0] if words else label


def _colour_key(label: str) -> str | None:
    """The longest key of MODE_COLOURS that the label's first word starts with, part by
    ``:``-separated part (``roce:adaptive:16qp`` -> ``roce:adaptive``)."""
    parts = _first_word(label).split(":")
    for end in range(len(parts), 0, -1):
        key = ":".join(parts[:end])
        if key in MODE_COLOURS:
            return key
    return None


def colour_of(label: str) -> str | None:
    """A line's colour from the first word of its label: a mode (``ecn_trim_on``) or a
    contender (``mrc (256 EVs)``, ``roce:nccl``), a variant taking its contender's
    (``roce:perftest:t10`` is perftest's); None (matplotlib's next colour) for one without."""
    key = _colour_key(label)
    return MODE_COLOURS[key] if key is not None else None


def _variant_index(label: str, labels: Sequence[str]) -> int | None:
    """Which variant of its colour ``label`` is among ``labels`` (0 the first), or None when
    it is no variant: it has no colour of its own or is the contender itself."""
    key = _colour_key(label)
    if key is None or _first_word(label) == key:
        return None
    variants = [o for o in labels if _colour_key(o) == key and _first_word(o) != key]
    return variants.index(label)


def line_style(label: str, labels: Sequence[str]) -> str:
    """Solid for a contender, a dash pattern for each variant sharing its colour."""
    index = _variant_index(label, labels)
    return "-" if index is None else VARIANT_DASHES[index % len(VARIANT_DASHES)]


def hatch_of(label: str, labels: Sequence[str]) -> str | None:
    """No hatch for a contender's bar, a hatch for each variant sharing its colour."""
    index = _variant_index(label, labels)
    return None if index is None else VARIANT_HATCHES[index % len(VARIANT_HATCHES)]


def goodput_over_time(
    path: Path,
    title: str,
    series: Mapping[str, Sequence[Mapping[str, float]]],
    markers: Mapping[str, float],
) -> None:
    """Goodput (Mbit/s) against time for each labelled series, with vertical ``markers``."""
    figure, axes = plt.subplots(figsize=(9, 4))
    for label, points in series.items():
        axes.plot(
            [p["t_s"] for p in points],
            [p["goodput_bps"] / 1e6 for p in points],
            label=label,
            color=colour_of(label),
            linestyle=line_style(label, list(series)),
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
            color=colour_of(mode),
            hatch=hatch_of(mode, list(values)),
            edgecolor="white",
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
        colour = colour_of(mode)
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
    bars = right.bar(modes, heights, color=[colour_of(m) for m in modes])
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


Bounds = tuple[float, float, float]


def against_loss(
    path: Path,
    title: str,
    rates: Sequence[str],
    goodput: Mapping[str, Sequence[Bounds | None]],
    retention: Mapping[str, Sequence[Bounds | None]] | None,
    failures: Mapping[str, Sequence[int]] | None = None,
) -> None:
    """Left: goodput (Mbit/s) against the loss rate per transport; right: the retention of
    each transport's lossless goodput (when measured). Each point is (mean, min, max),
    drawn as the mean with its min-max as an error bar; the rates are evenly spaced
    categories, labelled in percent; a missing point is left out. A point where transfers
    failed (``failures``: per transport, the failed seeds at each rate; a failed transfer
    counts with goodput 0) is crossed and labelled with how many failed."""
    panels = 2 if retention is not None else 1
    figure, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), squeeze=False)
    charts: list[tuple[Mapping[str, Sequence[Bounds | None]], str]] = [
        (goodput, "goodput (Mbit/s)")
    ]
    if retention is not None:
        charts.append((retention, "goodput kept of its own lossless goodput"))
    for ax, (values, ylabel) in zip(axes[0], charts, strict=True):
        for line, (transport, points) in enumerate(values.items()):
            xs = [i for i, point in enumerate(points) if point is not None]
            known = [point for point in points if point is not None]
            ax.errorbar(
                xs,
                [mean for mean, _, _ in known],
                yerr=[
                    [mean - low for mean, low, _ in known],
                    [high - mean for mean, _, high in known],
                ],
                label=transport,
                color=colour_of(transport),
                linestyle=line_style(transport, list(values)),
                marker="o",
                capsize=3,
                linewidth=1.2,
            )
            failed = (failures or {}).get(transport, [])
            for x, count in enumerate(failed):
                point = points[x] if x < len(points) else None
                if count and point is not None:
                    mean = point[0]
                    ax.scatter([x], [mean], marker="x", s=90, color=colour_of(transport))
                    ax.annotate(
                        f"{count} failed",
                        (x, mean),
                        textcoords="offset points",
                        xytext=(4, 6 + 9 * line),
                        fontsize=7,
                        color=colour_of(transport),
                    )
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"{rate} %" for rate in rates])
        ax.set_xlabel("random loss on every fabric link (UDP 4791 only)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
