"""Typed reads of fields from a decoded JSON message, with a clear error naming the field.

Messages come from other processes (a peer agent, a local client), so every field is checked
for presence, type and range before use; a violation raises ``ProtocolError`` saying which
field of which message was wrong, and the caller refuses that message alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.io.errors import ProtocolError


def get_int(message: Mapping[str, Any], key: str, low: int, high: int) -> int:
    """An integer field within ``[low, high]`` (booleans are not integers here)."""
    value = message.get(key)
    if type(value) is not int:
        raise ProtocolError(f"field {key!r} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ProtocolError(f"field {key!r} = {value} is outside {low}-{high}")
    return value


def get_optional_int(message: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
    """Like ``get_int``, but absent or null means None."""
    if message.get(key) is None:
        return None
    return get_int(message, key, low, high)


def get_number(message: Mapping[str, Any], key: str, low: float, high: float) -> float:
    """A number (int or float) within ``[low, high]``."""
    value = message.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ProtocolError(f"field {key!r} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ProtocolError(f"field {key!r} = {value} is outside {low}-{high}")
    return float(value)


def get_optional_number(
    message: Mapping[str, Any], key: str, low: float, high: float
) -> float | None:
    """Like ``get_number``, but absent or null means None."""
    if message.get(key) is None:
        return None
    return get_number(message, key, low, high)


def get_str(message: Mapping[str, Any], key: str, max_length: int = 4096) -> str:
    """A non-empty string field of at most ``max_length`` characters."""
    value = message.get(key)
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"field {key!r} must be a non-empty string, got {value!r}")
    if len(value) > max_length:
        raise ProtocolError(f"field {key!r} is longer than {max_length} characters")
    return value


def get_optional_str(message: Mapping[str, Any], key: str, max_length: int = 4096) -> str | None:
    """Like ``get_str``, but absent or null means None."""
    if message.get(key) is None:
        return None
    return get_str(message, key, max_length)


def get_str_list(message: Mapping[str, Any], key: str, max_items: int) -> tuple[str, ...]:
    """A non-empty list of strings."""
    value = message.get(key)
    if not isinstance(value, list) or not value or len(value) > max_items:
        raise ProtocolError(f"field {key!r} must be a list of 1-{max_items} strings")
    if not all(isinstance(item, str) and item for item in value):
        raise ProtocolError(f"field {key!r} must hold non-empty strings only")
    return tuple(value)


def get_dict(message: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A JSON object field."""
    value = message.get(key)
    if not isinstance(value, dict):
        raise ProtocolError(f"field {key!r} must be an object, got {value!r}")
    return value
