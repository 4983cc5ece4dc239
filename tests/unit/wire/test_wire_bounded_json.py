"""Bounded JSON decoding: what is within the bounds decodes as ``json.loads`` would; anything
else, whatever the bytes, is JsonRejected (a ValueError) naming the reason, and never another
exception."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire.bounded_json import JsonRejected, decode_bounded

BOUNDS = {"max_bytes": 4096, "max_elements": 100, "max_depth": 8}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=20,
)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def test_values_within_the_bounds_decode():
    text = '{"command": "status", "args": [1, 2.5, null, true, "a]}\\"[{"]}'
    assert decode_bounded(text, **BOUNDS) == json.loads(text)
    assert decode_bounded(b"[" * 8 + b"]" * 8, **BOUNDS) == json.loads("[" * 8 + "]" * 8)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "longer than 4096 bytes"),
        ("[" * 2000 + "]" * 2000, "nested deeper than 8 levels"),
        ('{"a":' * 9 + "1" + "}" * 9, "nested deeper than 8 levels"),
        ("[" + "0," * 100 + "0]", "more than 100 elements"),
        ("[" + "[]," * 100 + "[]]", "more than 100 elements"),
        ("[1}", "unbalanced brackets"),
        ("not json", "not JSON"),
        ("", "not JSON"),
        (b"\xff\xfe[]", "not UTF-8"),
    ],
)
def test_input_past_a_bound_or_not_json_is_rejected_with_the_reason(data, reason):
    with pytest.raises(JsonRejected, match=reason):
        decode_bounded(data, **BOUNDS)


def test_an_integer_past_pythons_digit_limit_is_rejected():
    with pytest.raises(JsonRejected, match="not JSON"):
        decode_bounded("9" * 5000, max_bytes=10_000, max_elements=100)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '["' + "[" * 1000 + '\\"' + "{" * 1000 + '"]'
    assert decode_bounded(text, **BOUNDS) == json.loads(text)


def test_an_unterminated_string_full_of_escaped_quotes_is_rejected_quickly():
    """The string pattern cannot backtrack: 300,000 escaped quotes take one linear pass."""
    with pytest.raises(JsonRejected):
        decode_bounded('"' + '\\"' * 300_000, max_bytes=1 << 20, max_elements=100)


@given(st.binary(max_size=512))
def test_any_bytes_decode_or_are_rejected(data):
    with contextlib.suppress(JsonRejected):
        decode_bounded(data, **BOUNDS)


@given(json_values)
def test_any_json_decodes_exactly_when_it_is_within_the_depth_bound(value):
    text = json.dumps(value)
    try:
        decoded = decode_bounded(text, max_bytes=1 << 20, max_elements=1000, max_depth=3)
    except JsonRejected:
        assert _depth(value) > 3
    else:
        assert _depth(value) <= 3
        assert decoded == json.loads(text)
