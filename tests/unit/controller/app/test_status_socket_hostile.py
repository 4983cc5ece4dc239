"""The status socket under hostile input: whatever one client sends (too deep, too long, not an
object, not even text) gets an ``{"ok": false}`` answer and one warning, nothing reaches
asyncio's exception handler, and the next client is answered as usual. The client side is as
strict: an answer that is too long, too deep or not JSON is StatusUnavailable, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.app import status_socket
from controller.app.status_socket import (
    RequestRefused,
    StatusUnavailable,
    parse_request,
    request_status,
    serve_status,
)


async def _status() -> dict[str, Any]:
    return {"topology": "t", "links": []}


def _raw(path: Path, payload: bytes) -> dict[str, Any]:
    """Send ``payload`` as one client and return the server's answer (10 s at most)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10.0)
        client.connect(str(path))
        # The server may answer and close before reading everything we send.
        with contextlib.suppress(OSError):
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return json.loads(answer)


def _serving(path: Path, body: Callable[[], Any]) -> tuple[Any, list[dict[str, Any]]]:
    """Run ``body`` in a thread while the server runs; also what reached asyncio's handler."""
    unhandled: list[dict[str, Any]] = []

    async def main() -> Any:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: unhandled.append(context)
        )
        server = await serve_status(path, _status)
        try:
            return await asyncio.to_thread(body)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(main()), unhandled


HOSTILE_REQUESTS = {
    # 30,000 deep fits the 64 KiB line: json.loads would recurse into RecursionError.
    "30,000-deep array": b"[" * 30_000 + b"]" * 30_000 + b"\n",
    "100,000-deep array": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "17-deep object": b'{"a":' * 17 + b"1" + b"}" * 17 + b"\n",
    "oversized line": b'{"command": "' + b"x" * 200_000 + b'"}\n',
    "array instead of object": b'["command", "status"]\n',
    "string instead of object": b'"status"\n',
    "not UTF-8": b'{"command": "\xff\xfe"}\n',
    "too many elements": b'{"command": "status", "x": [' + b"0," * 5000 + b"0]}\n",
    "huge integer": b'{"command": ' + b"9" * 10_000 + b"}\n",
}


@pytest.mark.parametrize("payload", HOSTILE_REQUESTS.values(), ids=HOSTILE_REQUESTS.keys())
def test_a_hostile_request_gets_an_error_answer_and_the_next_client_is_served(
    tmp_path, caplog, payload
):
    path = tmp_path / "ctl.sock"
    caplog.set_level(logging.WARNING, logger=status_socket.__name__)
    (answer, status), unhandled = _serving(
        path, lambda: (_raw(path, payload), request_status(path))
    )
    assert answer["ok"] is False and isinstance(answer["error"], str)
    assert status == {"topology": "t", "links": []}
    assert unhandled == []
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_a_client_that_sends_nothing_is_not_warned_about(tmp_path, caplog):
    """The liveness probe of a starting controller connects and closes: not an incident."""
    path = tmp_path / "ctl.sock"
    caplog.set_level(logging.WARNING, logger=status_socket.__name__)

    def probe_then_ask() -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(str(path))
        return request_status(path)

    status, unhandled = _serving(path, probe_then_ask)
    assert status["topology"] == "t" and unhandled == [] and caplog.records == []


def test_a_client_that_starts_a_request_and_stalls_gets_an_error_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(status_socket, "REQUEST_TIMEOUT_S", 0.2)
    path = tmp_path / "ctl.sock"

    def stall_then_ask() -> tuple[dict[str, Any], dict[str, Any]]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(10.0)
            client.connect(str(path))
            client.sendall(b'{"command": ')  # and nothing more, not even a close
            answer = json.loads(client.makefile("rb").read())
        return answer, request_status(path)

    (answer, status), unhandled = _serving(path, stall_then_ask)
    assert answer == {"ok": False, "error": "no request within 0.2 s"}
    assert status["topology"] == "t" and unhandled == []


def test_an_answer_that_cannot_be_encoded_is_an_error_answer(tmp_path):
    path = tmp_path / "ctl.sock"
    loop: list[Any] = []
    loop.append(loop)  # json.dumps refuses a circular structure

    async def circular() -> dict[str, Any]:
        return {"loop": loop}

    async def main() -> dict[str, Any]:
        server = await serve_status(path, circular)
        try:
            return await asyncio.to_thread(_raw, path, b'{"command": "status"}\n')
        finally:
            server.close()
            await server.wait_closed()

    answer = asyncio.run(main())
    assert answer["ok"] is False and "status failed" in answer["error"]


# --- the client side: a hostile "controller" on the socket -----------------------------------


@pytest.fixture
def fake_controller(tmp_path) -> Iterator[Callable[[bytes], Path]]:
    """A socket that answers every connection with the given bytes, then closes."""
    listeners: list[socket.socket] = []

    def start(answer: bytes) -> Path:
        path = tmp_path / f"fake{len(listeners)}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen()
        listeners.append(listener)

        def serve() -> None:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                # The client stops reading a huge answer: what it should do.
                with contextlib.suppress(OSError):
                    connection.sendall(answer)

        threading.Thread(target=serve, daemon=True).start()
        return path

    yield start
    for listener in listeners:
        listener.close()


HOSTILE_ANSWERS = {
    "100,000-deep array": b"[" * 100_000 + b"]" * 100_000,
    "not JSON": b"<html>",
    "not an object": b"[1, 2, 3]",
    "no status": b'{"ok": true}',
    "a refusal": b'{"ok": false, "error": "' + b"e" * 100_000 + b'"}',
    "larger than 16 MiB": b'{"ok": true, "status": "' + b"x" * (17 << 20) + b'"}',
    "nothing": b"",
}


@pytest.mark.parametrize("answer", HOSTILE_ANSWERS.values(), ids=HOSTILE_ANSWERS.keys())
def test_a_hostile_answer_is_status_unavailable(fake_controller, answer):
    with pytest.raises(StatusUnavailable) as raised:
        request_status(fake_controller(answer), timeout_s=10.0)
    assert len(str(raised.value)) < 1000  # a refusal's text is cut, not echoed in full


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(answer=st.binary(max_size=2048))
def test_any_answer_bytes_are_a_status_or_status_unavailable(fake_controller, answer):
    try:
        status = request_status(fake_controller(answer), timeout_s=10.0)
    except StatusUnavailable:
        return
    assert isinstance(status, dict)


#: Any JSON value, for the request parser's property test.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=20,
)


@given(st.binary(max_size=512) | json_values.map(lambda value: json.dumps(value).encode()))
def test_any_request_line_is_the_status_command_or_refused(line):
    with contextlib.suppress(RequestRefused):
        assert parse_request(line) == "status"


def test_the_status_request_is_accepted_and_others_refused_with_the_reason():
    assert parse_request(b'{"command": "status"}\n') == "status"
    with pytest.raises(RequestRefused, match="longer than"):
        parse_request(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(RequestRefused, match="nested deeper than 16"):
        parse_request(b"[" * 30_000 + b"]" * 30_000)
    with pytest.raises(RequestRefused, match="must be a JSON object"):
        parse_request(b"[]")
    with pytest.raises(RequestRefused, match="unknown command 'reboot'"):
        parse_request(b'{"command": "reboot"}')
