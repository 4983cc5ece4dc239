"""Per-command settings on top of the core's defaults (``--evs``, ``--cc``, ``--payload``,
``--dscp``).

The core validates its configuration and raises ``ValueError``; here that becomes a
``UsageError`` naming the option, so ``mrc-perf --evs 0`` exits 2 with a sentence a user can
act on rather than a traceback.
"""

from __future__ import annotations

import dataclasses

from agent.core import MrcConfig
from agent.core.cc_registry import congestion_control_spec
from agent.io.errors import UsageError
from wire.dscp import DscpMap


def parse_dscp(text: str) -> DscpMap:
    """``--dscp control=40,trimmable=10,...``: the default values with the named classes
    changed; ``UsageError`` for an unknown class, a value out of 0-63 or two equal values."""
    changes: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise UsageError(f"{item!r}: expected CLASS=VALUE[,CLASS=VALUE...]")
        changes[name.strip()] = int(value)
    try:
        return DscpMap().replace(changes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def with_overrides(
    base: MrcConfig,
    *,
    evs: int | None = None,
    cc: str | None = None,
    payload: int | None = None,
    dscp: DscpMap | None = None,
    fabric_rate: float | None = None,
) -> MrcConfig:
    """``base`` with the given fields replaced (None keeps the base value); ``fabric_rate``
    (packets/s of the fabric's slowest links) scales NSCC's target delay to it."""
    changes: dict[str, object] = {}
    if fabric_rate is not None:
        try:
            changes["nscc"] = base.nscc.scaled_to(fabric_rate)
        except ValueError as exc:
            raise UsageError(f"invalid --fabric-rate: {exc}") from None
    if evs is not None:
        changes["ev_set_size"] = evs
    if cc is not None:
        try:
            congestion_control_spec(cc)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        changes["congestion_control"] = cc
    if payload is not None:
        changes["payload_size"] = payload
    if dscp is not None:
        changes["dscp"] = dscp
    if not changes:
        return base
    try:
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]
    except ValueError as exc:
        option = {"ev_set_size": "--evs", "payload_size": "--payload"}
        names = ", ".join(option.get(name, name) for name in changes)
        raise UsageError(f"invalid {names}: {exc}") from None
