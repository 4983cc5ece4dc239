"""Arithmetic on 24-bit packet sequence numbers (PSNs), and the 16-bit message number mask.

PSNs wrap at 2**24, so "before" and "after" only make sense within half the space: every PSN
comparison in the core goes through ``psn_diff``, which is what keeps a long-lived connection
correct across the wrap. Message sequence numbers (METH) are 16 bits and only ever used as
keys, so they need a mask and no ordering.
"""

from __future__ import annotations

from typing import Final

PSN_MASK: Final = (1 << 24) - 1
_PSN_HALF: Final = 1 << 23

MSN_MASK: Final = (1 << 16) - 1


def psn_diff(a: int, b: int) -> int:
    """Signed distance ``a - b`` in PSN space, in ``[-2**23, 2**23)``.

    Positive when ``a`` comes after ``b``; only meaningful when the two are less than 2**23
    apart, which the PSN window guarantees for every PSN a connection still cares about.
    """
    return ((a - b + _PSN_HALF) & PSN_MASK) - _PSN_HALF
