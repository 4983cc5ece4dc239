"""The status socket: a JSON request gets a JSON answer; bad requests get an error answer and
never stop the server; a stale socket file is replaced, a live one or a plain file refused."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from controller.app.status_socket import (
    StatusSocketBusy,
    StatusUnavailable,
    request_status,
    serve_status,
)


async def _status() -> dict:
    return {"topology": "t", "links": []}


def _raw(path: Path, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(path))
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
        return json.loads(client.makefile("rb").read())


def _serving(path: Path, body, handler=_status):
    async def main():
        server = await serve_status(path, handler)
        try:
            return await asyncio.to_thread(body)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(main())


def test_a_status_request_gets_the_handlers_answer(tmp_path):
    path = tmp_path / "ctl.sock"
    assert _serving(path, lambda: request_status(path)) == {"topology": "t", "links": []}
    assert (path.stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"not json\n", "not JSON"),
        (b"[1, 2]\n", "JSON object"),
        (b'{"command": "reboot"}\n', "unknown command"),
        (b"\n", "not JSON"),
    ],
)
def test_a_bad_request_gets_an_error_answer_and_the_server_keeps_serving(tmp_path, payload, error):
    path = tmp_path / "ctl.sock"

    def body():
        answer = _raw(path, payload)
        return answer, request_status(path)

    answer, status = _serving(path, body)
    assert answer["ok"] is False and error in answer["error"]
    assert status["topology"] == "t"


def test_a_failing_handler_is_an_error_answer(tmp_path):
    path = tmp_path / "ctl.sock"

    async def broken() -> dict:
        raise RuntimeError("snapshot bug")

    with pytest.raises(StatusUnavailable, match="snapshot bug"):
        _serving(path, lambda: request_status(path), broken)


def test_no_controller_means_status_unavailable(tmp_path):
    with pytest.raises(StatusUnavailable, match="no controller is listening"):
        request_status(tmp_path / "nobody.sock")


def test_a_stale_socket_file_is_replaced(tmp_path):
    path = tmp_path / "ctl.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    assert _serving(path, lambda: request_status(path))["topology"] == "t"


def test_a_live_socket_of_another_controller_is_refused(tmp_path):
    path = tmp_path / "ctl.sock"

    async def main():
        server = await serve_status(path, _status)
        try:
            with pytest.raises(StatusSocketBusy, match="another controller"):
                await serve_status(path, _status)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_a_path_that_is_a_plain_file_is_refused_and_kept(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("precious")
    with pytest.raises(StatusSocketBusy, match="not a socket"):
        asyncio.run(serve_status(path, _status))
    assert path.read_text() == "precious"
