"""Reading the fields of a host-API request line: each helper checks one field and raises an
``ApiError`` naming it (in OCP's terms where it has one), so a bad request changes nothing."""

from __future__ import annotations

import ipaddress
from typing import Any, Final

from agent.api.errors import InvalidArgument, TooBig
from agent.api.types import Ev
from agent.core.ev_expansion import MAX_EV_BYTES
from agent.io.json_lines import Message

U16: Final = 0xFFFF
U24: Final = 0xFFFFFF
U32: Final = 0xFFFFFFFF
U64: Final = (1 << 64) - 1


def required(message: Message, key: str, where: str | None = None) -> object:
    if key not in message:
        raise InvalidArgument("missing", where or key)
    return message[key]


def int_field(
    message: Message, key: str, low: int = 0, high: int = U64, where: str | None = None
) -> int:
    value = required(message, key, where)
    if type(value) is not int or not low <= value <= high:
        raise InvalidArgument(f"must be an integer in {low}-{high}, got {value!r}", where or key)
    return value


def opt_int_field(message: Message, key: str, low: int = 0, high: int = U64) -> int | None:
    return None if message.get(key) is None else int_field(message, key, low, high)


def list_field(message: Message, key: str, limit: int, where: str | None = None) -> list[Any]:
    value = required(message, key, where)
    if not isinstance(value, list):
        raise InvalidArgument("must be a list", where or key)
    if len(value) > limit:
        raise TooBig(f"at most {limit} entries, got {len(value)}", where or key)
    return value


def ev_field(raw: object, where: str) -> Ev:
    if not isinstance(raw, dict):
        raise InvalidArgument("must be an object with 'val' and 'port'", where)
    text = raw.get("val")
    if not isinstance(text, str) or not text.startswith("0x") or len(text) % 2:
        raise InvalidArgument("'val' must be 0x and whole bytes of hex", f"{where}.val")
    try:
        val = bytes.fromhex(text[2:])
    except ValueError:
        raise InvalidArgument("'val' is not hex", f"{where}.val") from None
    if len(val) > MAX_EV_BYTES:
        raise InvalidArgument(f"at most {MAX_EV_BYTES} bytes", f"{where}.val")
    port = int_field(raw, "port", 0, 255, f"{where}.port")
    return Ev(val, port)


def enum_field(kind: Any, raw: object, where: str) -> Any:
    try:
        if isinstance(raw, str):
            return kind[raw.upper()]
        return kind(raw)
    except (KeyError, ValueError):
        names = ", ".join(member.name for member in kind)
        raise InvalidArgument(f"{raw!r} is not one of {names}", where) from None


def address_field(raw: object, where: str, size: int) -> bytes:
    try:
        packed = ipaddress.ip_address(raw).packed  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise InvalidArgument(f"{raw!r} is not an IP address", where) from None
    if len(packed) != size:
        raise InvalidArgument("not of this host's IP version", where)
    return packed
