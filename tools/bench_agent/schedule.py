"""The order of the veth benchmark's runs: counter-balanced, so that a drift of the machine's
speed (a shared VM drifts by 10 % within minutes) weighs on both sides of every ratio alike,
not on whichever side always ran first."""

from __future__ import annotations

from collections.abc import Sequence

from tools.counterbalance import ordered

#: The veth benchmark's two conditions (``run_order`` says which comes first in a repeat).
PHASES = ("lossless", "lossy")


def run_order(tools: Sequence[str], repeat: int) -> list[tuple[str, list[str]]]:
    """The runs of repeat ``repeat`` (from 0), in the order they are made: each phase with its
    tools in order. The phases alternate from repeat to repeat (lossless first on even
    repeats, lossy first on odd ones) and the tools from one phase block to the next, so
    over repeats 0 and 1 each phase comes first once and, within each phase, each tool."""
    return [
        (phase, ordered(tools, 2 * repeat + block))
        for block, phase in enumerate(ordered(PHASES, repeat))
    ]
