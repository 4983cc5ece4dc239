"""JSON from a peer, decoded within bounds: size, nesting depth and element count.

``json.loads`` has no limits of its own: a line of 100,000 ``[`` makes it recurse until it
raises RecursionError (not ValueError), and a small text can still hold a huge number of
elements. Whatever arrives from outside the process goes through :func:`decode_bounded`,
which either returns the value or raises :class:`JsonRejected` and nothing else, so one
peer's bad input is an error for that peer and never escapes as an unexpected exception.

Both JSON protocols between the testbed's processes decode with it: the agent's JSON lines
(side channel, control socket, host API; ``agent.io.json_lines``) and the controller's status
socket (``controller.app.status_socket``). It lives in ``wire`` because what a peer's control
message may cost to decode is part of those protocols, as a frame's fields are part of MRC's,
and ``wire`` is the layer both the agent and the controller import; ``hostenv`` is the host's
platform (namespaces, kernel features, tools), which a message format is not.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Nesting that any message of ours stays well below (a status answer is 7 deep).
DEFAULT_MAX_DEPTH = 16

#: A JSON string, its closing quote optional so that the match never fails (and never
#: backtracks) on an unterminated string: matching stays linear in the text's length.
_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"?', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_CLOSING = {"]": "[", "}": "{"}


class JsonRejected(ValueError):
    """The input is not JSON, or is JSON beyond the caller's bounds; the message says which."""


def decode_bounded(
    data: bytes | str,
    *,
    max_bytes: int,
    max_elements: int,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """The JSON value in ``data``, or :class:`JsonRejected`: never any other exception.

    ``max_bytes`` bounds the length (characters, for a ``str``); ``max_elements`` the items of
    all arrays and the members of all objects together; ``max_depth`` the nesting of arrays
    and objects (a scalar is depth 0, ``[]`` depth 1).
    """
    try:
        return _decode(data, max_bytes, max_elements, max_depth)
    except JsonRejected:
        raise
    except Exception as error:  # RecursionError, a bug in a check: still this input's error
        raise JsonRejected(f"cannot decode the JSON ({type(error).__name__})") from None


def _decode(data: bytes | str, max_bytes: int, max_elements: int, max_depth: int) -> Any:
    if len(data) > max_bytes:
        raise JsonRejected(f"longer than {max_bytes} bytes")
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonRejected("not UTF-8 text") from None
    else:
        text = data
    _check_nesting(text, max_depth, max_elements)
    try:
        value = json.loads(text)
    except ValueError:
        raise JsonRejected("not JSON") from None
    _check_elements(value, max_elements)
    return value


def _check_nesting(text: str, max_depth: int, max_elements: int) -> None:
    """Refuse nesting past ``max_depth`` before ``json.loads`` recurses into it.

    Only the first ``2 * max_elements + 2`` brackets are walked (in Python): balanced, they
    would open more than ``max_elements`` containers, which the count after them refuses.
    """
    brackets = _NOT_A_BRACKET.sub("", _STRING.sub("", text))
    open_brackets: list[str] = []
    for bracket in brackets[: 2 * max_elements + 2]:
        if bracket in "[{":
            open_brackets.append(bracket)
            if len(open_brackets) > max_depth:
                raise JsonRejected(f"nested deeper than {max_depth} levels")
        elif not open_brackets or open_brackets.pop() != _CLOSING[bracket]:
            raise JsonRejected("not JSON (unbalanced brackets)")
    if brackets.count("[") + brackets.count("{") > max_elements:
        raise JsonRejected(_too_many(max_elements))


def _check_elements(value: Any, max_elements: int) -> None:
    count = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if not isinstance(item, dict | list):
            continue
        count += len(item)
        if count > max_elements:
            raise JsonRejected(_too_many(max_elements))
        pending.extend(item.values() if isinstance(item, dict) else item)


def _too_many(max_elements: int) -> str:
    return f"more than {max_elements} elements (array items and object values together)"
