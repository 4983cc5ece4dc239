"""What the benches' progress lines say of one measurement: its goodput as the experiments'
summaries write it, and that it was measured again while the hypervisor stole too much of its
cores (:func:`tools.cpu_accounting.run_unstolen`), since that is what made it take longer.

The lines themselves, the heartbeat and the live bar are :mod:`experiments.progress`'s, on
standard error; a bench's JSON on standard output is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.stats import mbit


def goodput(run: dict[str, Any]) -> str:
    """``goodput 812.345 Mbit/s`` of a measurement with a ``goodput_bps``."""
    return f"goodput {mbit(float(run['goodput_bps']))} Mbit/s"


def with_retries(figure: str, set_aside: Sequence[object]) -> str:
    """``figure``, and how often the measurement was made again for steal, if it was."""
    if not set_aside:
        return figure
    return f"{figure} (measured again {len(set_aside)}x: too much stolen)"
