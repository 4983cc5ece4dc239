"""How a port's ECN thresholds (packets) become a qdisc that marks CE under the port's ``tbf``.

BMv2 marks ECN-capable packets with a probability that rises from 0 at ``ecn_min_threshold``
queued packets to 1 at ``ecn_max_threshold`` (RED-like). The kernel has three qdiscs that can
mark, and kernels differ in which they offer, so the first one offered, in
:data:`ECN_QDISC_PREFERENCE` order, is used:

1. ``red`` with ``ecn``: the same model as BMv2 (a queue length in bytes, a linear marking
   probability between min and max, 1.0 at max), thresholds in full frames (:data:`FRAME_BYTES`).
2. ``codel`` with ``ce_threshold``: marks every ECN-capable packet that waited longer than the
   time ``ecn_min_threshold`` full frames take to leave at the port's rate: a step at the min
   threshold instead of a ramp to the max.
3. ``fq_codel`` with ``ce_threshold``: the same step, but per flow queue (MRC's entropy values
   spread one connection over many flows), so the least faithful of the three.

The marker is the child of the port's ``tbf`` (root handle :data:`SHAPER_HANDLE`, child parent
:data:`MARKER_PARENT`): a ``tbf`` is where a veth's frames wait, so an unshaped port (rate 0)
has no queue and nothing to mark. Pure functions only; :mod:`.namespace` writes the result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from controller.intent.model import PortIntent
from hostenv.tbf import FRAME_BYTES, TbfParameters

#: The ECN-capable qdiscs, most faithful to BMv2's marking first.
ECN_QDISC_PREFERENCE = ("red", "codel", "fq_codel")

#: The handle the port's root ``tbf`` is written with, so that its child has a known parent.
SHAPER_HANDLE = "1:"
#: Where a ``tbf`` holds its inner qdisc (its one class).
MARKER_PARENT = "1:1"

#: RED's marking probability at the max threshold: 1.0, as BMv2's ramp reaches 1 there.
RED_MAX_PROBABILITY = "1.0"


@dataclass(frozen=True)
class EcnMarker:
    """A marking qdisc under a port's ``tbf``: its kind and the arguments after the kind.

    A marker read back from the kernel carries only its kind (``arguments`` empty) unless the
    southbound itself wrote it (:mod:`.namespace` keeps what it wrote), so a marker of unknown
    origin differs from any wanted one and is rewritten once.
    """

    kind: str
    arguments: tuple[str, ...] = ()

    def tc_arguments(self) -> tuple[str, ...]:
        """The arguments after ``tc qdisc replace dev IF parent 1:1``."""
        return (self.kind, *self.arguments)


def choose_ecn_qdisc(offered: Iterable[str]) -> str | None:
    """The most faithful ECN-capable qdisc among ``offered``; None if there is none."""
    available = frozenset(offered)
    return next((kind for kind in ECN_QDISC_PREFERENCE if kind in available), None)


def ecn_marker(port: PortIntent, offered: Iterable[str]) -> EcnMarker | None:
    """The marker for ``port`` with the qdiscs the kernel ``offered``; None where the port does
    not mark (ECN off in the intent, which is always so toward hosts), has no queue (rate 0)
    or the kernel offers no ECN-capable qdisc."""
    if not port.ecn_enabled or port.queue_rate_pps <= 0 or port.queue_depth <= 0:
        return None
    kind = choose_ecn_qdisc(offered)
    if kind == "red":
        return red_marker(port)
    if kind is not None:
        return ce_threshold_marker(kind, port)
    return None


def red_marker(port: PortIntent) -> EcnMarker:
    """``red ... ecn``: queue ``depth`` frames, marking from ``ecn_min_threshold`` frames with a
    probability reaching 1.0 at ``ecn_max_threshold`` frames. RED needs min >= 1 frame and
    max > min, so a max at or below min becomes min + 1 frame (a step, as near as RED gets)."""
    min_packets = max(1, port.ecn_min_threshold)
    max_packets = max(min_packets + 1, port.ecn_max_threshold)
    rate = port.queue_rate_pps * FRAME_BYTES * 8
    return EcnMarker(
        "red",
        (
            "limit",
            f"{port.queue_depth * FRAME_BYTES}b",
            "min",
            f"{min_packets * FRAME_BYTES}b",
            "max",
            f"{max_packets * FRAME_BYTES}b",
            "avpkt",
            f"{FRAME_BYTES}b",
            "bandwidth",
            f"{rate}bit",
            "probability",
            RED_MAX_PROBABILITY,
            "ecn",
        ),
    )


def ce_threshold_marker(kind: str, port: PortIntent) -> EcnMarker:
    """``codel``/``fq_codel`` marking CE above the sojourn time of ``ecn_min_threshold`` full
    frames at the port's rate (rounded up to a microsecond, at least one), holding ``depth``
    packets; ``ecn`` so that codel's own control law marks rather than drops as well."""
    if kind not in ("codel", "fq_codel"):
        raise ValueError(f"{kind!r} has no ce_threshold (codel or fq_codel)")
    threshold_us = max(1, math.ceil(max(1, port.ecn_min_threshold) * 1e6 / port.queue_rate_pps))
    return EcnMarker(
        kind, ("limit", str(port.queue_depth), "ce_threshold", f"{threshold_us}us", "ecn")
    )


def plain_fifo(shaper: TbfParameters) -> EcnMarker:
    """What replaces a marker no longer wanted under a ``tbf`` that stays: the ``bfifo`` of
    the tbf's limit that ``tbf`` itself creates (deleting the child would leave ``noop``,
    which drops everything)."""
    return EcnMarker("bfifo", ("limit", f"{shaper.limit_bytes}b"))
