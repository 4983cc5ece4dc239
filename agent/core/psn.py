"""Arithmetic on 24-bit packet sequence numbers (PSNs) and 16-bit message numbers.

PSNs wrap at 2**24 and message sequence numbers (MSNs) at 2**16, so "before" and "after" only make
sense within half the space: every comparison in the core goes through these helpers, which
is what keeps a long-lived connection correct across the wrap.
"""

from __future__ import annotations

PSN_BITS = 24
PSN_MODULUS = 1 << PSN_BITS
PSN_MASK = PSN_MODULUS - 1
_PSN_HALF = PSN_MODULUS >> 1

MSN_MODULUS = 1 << 16
MSN_MASK = MSN_MODULUS - 1
_MSN_HALF = MSN_MODULUS >> 1


def psn_add(psn: int, delta: int) -> int:
    """``psn + delta`` in PSN space."""
    return (psn + delta) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """Signed distance ``a - b`` in PSN space, in ``[-2**23, 2**23)``.

    Positive when ``a`` comes after ``b``; only meaningful when the two are less than 2**23
    apart, which the PSN window guarantees for every PSN a connection still cares about.
    """
    return ((a - b + _PSN_HALF) & PSN_MASK) - _PSN_HALF


def msn_add(msn: int, delta: int) -> int:
    """``msn + delta`` in MSN space."""
    return (msn + delta) & MSN_MASK


def msn_diff(a: int, b: int) -> int:
    """Signed distance ``a - b`` in MSN space, in ``[-2**15, 2**15)``."""
    return ((a - b + _MSN_HALF) & MSN_MASK) - _MSN_HALF
