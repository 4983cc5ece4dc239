"""Side-channel and control-socket messages: round trips, and every kind of bad input refused."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.io.control_protocol import (
    PerfRequest,
    SendRequest,
    StatusRequest,
    error_reply,
    ok_reply,
    parse_reply,
    parse_request,
    progress_reply,
)
from agent.io.errors import (
    ErrorCode,
    PeerUnreachableError,
    ProtocolError,
    TransferFailedError,
)
from agent.io.json_lines import MAX_LINE, decode_line, encode_line
from agent.io.side_channel import (
    Bye,
    Commit,
    Committed,
    Farewell,
    Hello,
    Purpose,
    Refusal,
    Welcome,
    parse_side_message,
    peer_plane_addresses,
)

DIGEST = "ab" * 32

SIDE_MESSAGES = [
    Hello(qp=7, psn=0xABCDEF, planes=("10.0.0.1", "10.0.1.1"), purpose=Purpose.SINK, length=64),
    Hello(qp=2, psn=0, planes=("fd00::1",), purpose=Purpose.FILE, length=1, name="a.bin"),
    Welcome(qp=0xFFFFFF, psn=1, planes=("10.0.0.2",), rkey=0xDEADBEEF, va=1 << 40, length=5),
    Commit(sha256=DIGEST),
    Committed(sha256=DIGEST, path="/out/a.bin", length=3),
    Bye(),
    Farewell(receiver={"bytes_received": 10, "drops": {}}),
    Refusal(code=ErrorCode.TRANSFER_FAILED, message="no --out-dir"),
]


@pytest.mark.parametrize("message", SIDE_MESSAGES, ids=lambda m: type(m).__name__)
def test_every_side_channel_message_survives_a_trip_through_a_json_line(message):
    line = encode_line(message.to_json())
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_side_message(decode_line(line)) == message


def _hello(**changes: object) -> dict:
    base = Hello(qp=7, psn=1, planes=("10.0.0.1",), purpose=Purpose.SINK, length=64).to_json()
    base.update(changes)
    return {key: value for key, value in base.items() if value is not None}


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"v": 2}, "version"),
        ({"qp": 1}, "'qp'"),
        ({"qp": 1 << 24}, "'qp'"),
        ({"qp": True}, "'qp'"),
        ({"psn": -1}, "'psn'"),
        ({"length": 0}, "'length'"),
        ({"length": "64"}, "'length'"),
        ({"planes": []}, "'planes'"),
        ({"planes": [""]}, "'planes'"),
        ({"planes": "10.0.0.1"}, "'planes'"),
        ({"purpose": "steal"}, "purpose"),
        ({"purpose": "file"}, "'name'"),
    ],
)
def test_a_hello_with_a_bad_field_is_refused_naming_the_field(changes, complaint):
    with pytest.raises(ProtocolError, match=complaint):
        parse_side_message(_hello(**changes))


@pytest.mark.parametrize("digest", ["", "AB" * 32, "ab" * 31, "zz" * 32])
def test_a_commit_needs_a_lowercase_sha256_hex_digest(digest):
    with pytest.raises(ProtocolError, match="sha256"):
        parse_side_message({"type": "commit", "sha256": digest})


def test_an_unknown_side_channel_message_type_is_refused():
    with pytest.raises(ProtocolError, match="unknown side-channel message type"):
        parse_side_message({"type": "reboot"})


def test_an_error_with_an_unknown_code_still_parses_as_internal():
    refusal = parse_side_message({"type": "error", "code": "alien", "message": "?"})
    assert refusal == Refusal(ErrorCode.INTERNAL, "?")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    ["type", "v", "qp", "psn", "planes", "purpose", "length", "name", "rkey", "va", "sha256"]
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(_KEYS, _JSON, max_size=9),
    st.sampled_from(["hello", "welcome", "commit", "committed", "bye", "farewell", "error"]),
)
def test_arbitrary_json_objects_either_parse_or_raise_protocol_error_only(message, kind):
    message["type"] = kind
    with contextlib.suppress(ProtocolError):
        parse_side_message(message)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "op", "path", "to", "bytes", "evs"]), _JSON))
def test_arbitrary_control_requests_either_parse_or_raise_protocol_error_only(message):
    with contextlib.suppress(ProtocolError):
        parse_request(message)


@pytest.mark.parametrize(
    "line",
    [b"not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"{"],
)
def test_a_line_that_is_not_a_json_object_is_a_protocol_error(line):
    with pytest.raises(ProtocolError):
        decode_line(line)


def test_lines_are_compact_and_refuse_nan():
    assert encode_line({"a": 1, "b": [1, 2]}) == b'{"a":1,"b":[1,2]}\n'
    with pytest.raises(ValueError):
        encode_line({"x": float("nan")})
    assert MAX_LINE >= 1 << 16


def test_peer_planes_must_match_in_count_and_ip_version():
    local4 = (bytes([10, 0, 0, 1]),)
    assert peer_plane_addresses(["10.0.0.2"], local4) == (bytes([10, 0, 0, 2]),)
    with pytest.raises(ProtocolError, match="plane count"):
        peer_plane_addresses(["10.0.0.2", "10.0.1.2"], local4)
    with pytest.raises(ProtocolError, match="IP version"):
        peer_plane_addresses(["fd00::2"], local4)
    with pytest.raises(ProtocolError, match="not an IP address"):
        peer_plane_addresses(["host"], local4)
    with pytest.raises(ProtocolError, match="unicast"):
        peer_plane_addresses(["0.0.0.0"], local4)


REQUESTS = [
    SendRequest(path="/tmp/a", to="10.0.0.2"),
    SendRequest(path="/tmp/a", to="[fd00::2]:9", name="b", message_size=4096),
    PerfRequest(to="h2"),
    PerfRequest(
        to="h2:1", total_bytes=10, duration=2.5, evs=1, cc="dcqcn", message_size=64, interval=0.5
    ),
    StatusRequest(),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_control_request_survives_a_trip_through_a_json_line(request_):
    message = decode_line(encode_line(request_.to_json(42)))
    assert message["id"] == 42
    assert parse_request(message) == request_


def test_a_send_request_with_a_relative_path_is_refused():
    with pytest.raises(ProtocolError, match="absolute"):
        parse_request({"id": 1, "op": "send", "path": "a.bin", "to": "h"})


def test_an_unknown_op_is_refused_listing_the_known_ones():
    with pytest.raises(ProtocolError, match="send, perf or status"):
        parse_request({"id": 1, "op": "format-disk"})


def test_replies_carry_results_progress_and_errors_back_to_the_client():
    assert parse_reply(ok_reply(3, {"bytes": 1})).result == {"bytes": 1}
    progress = parse_reply(progress_reply(3, {"elapsed_s": 1.0}))
    assert not progress.final and progress.progress == {"elapsed_s": 1.0}
    failed = parse_reply(json.loads(json.dumps(error_reply(3, PeerUnreachableError("gone")))))
    assert failed.final and isinstance(failed.error, PeerUnreachableError)
    assert str(failed.error) == "gone" and failed.error.exit_code == 4


def test_a_reply_with_neither_ok_nor_progress_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        parse_reply({"id": 1})


def test_an_error_reply_with_an_unknown_code_becomes_an_internal_error():
    reply = parse_reply({"id": 1, "ok": False, "error": {"code": "?", "message": "m"}})
    assert reply.error is not None and reply.error.exit_code == 1
    assert not isinstance(reply.error, TransferFailedError)
