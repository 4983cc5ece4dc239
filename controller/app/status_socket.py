"""The local Unix socket over which ``mrc-controller status`` asks the running controller.

One request per connection: the client sends a JSON object on one line
(``{"command": "status"}``), the server answers with one JSON object on one line and closes.
A request that is not JSON, not an object, too long, too deep (past 16 levels), too large (past
64 elements) or names an unknown command gets ``{"ok": false, "error": ...}`` and one warning
in the log; nothing a client sends, and no bug in answering it, can stop the server.
The client reads at most 16 MiB and turns any answer it cannot use into StatusUnavailable.

A subscription (``{"command": "subscribe", "period_s": 1.0}``) keeps its connection open: the
server answers ``{"ok": true, "kind": "subscribed", "period_s": ..., "topology": ...}``, then
sends, one JSON object per line, ``{"kind": "event", "event": {...}}`` for each event-log record
as it is written and ``{"kind": "status", "status": {...}}`` (the ``status`` answer) every
period, until the client hangs up. A client too slow to take the events gets a last
``{"kind": "error", ...}`` line and is dropped rather than holding memory without bound; it
may subscribe again. ``mrc-controller watch`` and the testbed's live page read this stream
(``controller.app.watch`` is the model both keep).

The socket file is private to its owner (mode 0600); a stale file left by a controller that
died is replaced, a live one (another controller answering) is an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wire.bounded_json import JsonRejected, decode_bounded

MAX_REQUEST_BYTES = 64 * 1024
#: A request is one small object: anything with more elements is not a request of ours.
MAX_REQUEST_ELEMENTS = 64
REQUEST_TIMEOUT_S = 5.0
#: The largest answer the client reads: a status of thousands of switches stays far below.
MAX_ANSWER_BYTES = 16 << 20
MAX_ANSWER_ELEMENTS = 1_000_000
#: How much of a refusal's text the client repeats in its error.
_ERROR_TEXT_CHARS = 200

#: The periods a subscription may ask for: faster floods the switches with counter reads.
MIN_PERIOD_S = 0.2
MAX_PERIOD_S = 60.0
#: Events queued for one subscriber before it counts as too slow and is dropped.
SUBSCRIBER_BACKLOG = 1024
#: Seconds a subscriber may leave a line unread before it is dropped.
SUBSCRIBER_WRITE_TIMEOUT_S = 30.0

StatusHandler = Callable[[], Awaitable[dict[str, Any]]]

_log = logging.getLogger(__name__)


class StatusSocketBusy(RuntimeError):
    """Another live controller already answers on this socket path."""


class StatusUnavailable(RuntimeError):
    """No controller answered on the socket (not running, or a different path)."""


class RequestRefused(ValueError):
    """A request the server answers with an error; the message is the answer's ``error``."""


class EventFeed:
    """Hands every event-log record to the open subscriptions (``EventLog.add_listener``).

    ``hello`` goes into each subscription's first line (the controller puts its topology
    there). Records are copied as JSON-safe values when published; a record published from
    another thread is handed over to the event loop that made the feed.
    """

    def __init__(self, hello: dict[str, Any] | None = None) -> None:
        self.hello = dict(hello or {})
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._subscribers: set[_Subscriber] = set()

    def publish(self, record: dict[str, Any]) -> None:
        """Queue ``record`` for every subscriber (marking those whose queue is full)."""
        if not self._subscribers:
            return
        safe = json.loads(json.dumps(record, default=str))
        if threading.get_ident() == self._thread:
            self._deliver(safe)
        else:
            self._loop.call_soon_threadsafe(self._deliver, safe)

    def _deliver(self, record: dict[str, Any]) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber.queue.put_nowait(record)
            except asyncio.QueueFull:
                subscriber.overflowed = True

    @contextmanager
    def subscription(self) -> Iterator[_Subscriber]:
        """A subscriber for the ``with`` block, removed however the block ends."""
        subscriber = _Subscriber()
        self._subscribers.add(subscriber)
        try:
            yield subscriber
        finally:
            self._subscribers.discard(subscriber)


class _Subscriber:
    __slots__ = ("overflowed", "queue")

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(SUBSCRIBER_BACKLOG)
        #: Set when an event did not fit: the stream has a gap, so it ends.
        self.overflowed = False


async def serve_status(
    path: Path, handler: StatusHandler, feed: EventFeed | None = None
) -> asyncio.Server:
    """Start answering ``status`` requests on ``path`` with what ``handler`` returns, and
    ``subscribe`` requests with ``feed``'s events and periodic statuses (refused without a
    feed)."""
    _claim(path)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Everything that goes wrong with one client ends here: answered when possible,
        # logged once, closed; nothing reaches asyncio's handler or the other clients.
        try:
            await _serve_one(reader, writer, handler, feed)
        except ConnectionError:
            pass  # the client went away; nothing to answer, nobody to tell
        except Exception as error:
            _log.warning("status socket: dropped a client after %s", _describe(error))
        finally:
            writer.close()

    server = await asyncio.start_unix_server(serve, path=str(path), limit=MAX_REQUEST_BYTES)
    os.chmod(path, 0o600)
    return server


async def _serve_one(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handler: StatusHandler,
    feed: EventFeed | None,
) -> None:
    try:
        line = await _read_request(reader)
        if not line:
            return  # connected and closed without a word (e.g. another controller's probe)
        request = _decode_request(line)
        if request.get("command") == "subscribe":
            period_s = _period_of(request)
            if feed is None:
                raise RequestRefused("this server takes no subscriptions")
            await _serve_subscription(reader, writer, handler, feed, period_s)
            return
        response = await _answer(line, handler)
    except RequestRefused as refusal:
        _log.warning("status socket: refused a request: %s", refusal)
        response = {"ok": False, "error": str(refusal)}
    writer.write(_encode(response))
    await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One line, or RequestRefused when it is too long or too slow to arrive."""
    try:
        return await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
    except (ValueError, asyncio.LimitOverrunError):
        raise RequestRefused(f"request longer than {MAX_REQUEST_BYTES} bytes") from None
    except TimeoutError:
        raise RequestRefused(f"no request within {REQUEST_TIMEOUT_S:g} s") from None


async def _answer(line: bytes, handler: StatusHandler) -> dict[str, Any]:
    """The answer to one request line; RequestRefused for a request we do not answer."""
    parse_request(line)
    try:
        status = await handler()
        json.dumps(status, default=str)  # an answer we cannot send is the handler's failure
    except Exception as error:  # a bug in the snapshot must not take the socket down
        raise RequestRefused(f"status failed: {_describe(error)}") from None
    return {"ok": True, "status": status}


def parse_request(line: bytes) -> str:
    """The command a request line names (``status`` or ``subscribe``); else RequestRefused."""
    request = _decode_request(line)
    if request.get("command") == "subscribe":
        _period_of(request)
    return str(request["command"])


def _decode_request(line: bytes) -> dict[str, Any]:
    try:
        request = decode_bounded(
            line, max_bytes=MAX_REQUEST_BYTES, max_elements=MAX_REQUEST_ELEMENTS
        )
    except JsonRejected as error:
        raise RequestRefused(f"request is not JSON we accept: {error}") from None
    if not isinstance(request, dict):
        raise RequestRefused("request must be a JSON object")
    command = request.get("command")
    if command not in ("status", "subscribe"):
        raise RequestRefused(f"unknown command {_cut(repr(command))} (known: status, subscribe)")
    return request


def _period_of(request: dict[str, Any]) -> float:
    period = request.get("period_s", 1.0)
    if (
        isinstance(period, bool)
        or not isinstance(period, int | float)
        or not MIN_PERIOD_S <= period <= MAX_PERIOD_S
    ):
        raise RequestRefused(
            f"period_s must be a number from {MIN_PERIOD_S:g} to {MAX_PERIOD_S:g}, "
            f"got {_cut(repr(period))}"
        )
    return float(period)


async def _serve_subscription(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handler: StatusHandler,
    feed: EventFeed,
    period_s: float,
) -> None:
    """Stream events and statuses until the client hangs up, falls behind, or a write stalls."""
    with feed.subscription() as subscriber:
        await _send(writer, {"ok": True, "kind": "subscribed", "period_s": period_s, **feed.hello})
        tasks = [
            asyncio.create_task(_push_events(writer, subscriber)),
            asyncio.create_task(_push_statuses(writer, handler, period_s)),
            asyncio.create_task(_until_hung_up(reader)),
        ]
        try:
            done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a failure is the client's end; serve() logs it
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(_encode(message))
    try:
        await asyncio.wait_for(writer.drain(), SUBSCRIBER_WRITE_TIMEOUT_S)
    except TimeoutError:
        raise ConnectionError("subscriber stopped reading") from None


async def _push_events(writer: asyncio.StreamWriter, subscriber: _Subscriber) -> None:
    while True:
        record = await subscriber.queue.get()
        if subscriber.overflowed:
            _log.warning("status socket: dropped a subscriber that fell behind the events")
            await _send(writer, {"kind": "error", "error": "too slow: events were lost"})
            return
        await _send(writer, {"kind": "event", "event": record})


async def _push_statuses(
    writer: asyncio.StreamWriter, handler: StatusHandler, period_s: float
) -> None:
    while True:
        try:
            status = await handler()
            message = {"kind": "status", "status": json.loads(json.dumps(status, default=str))}
        except Exception as error:  # a bug in one snapshot must not end the stream
            message = {"kind": "status_error", "error": f"status failed: {_describe(error)}"}
        await _send(writer, message)
        await asyncio.sleep(period_s)


async def _until_hung_up(reader: asyncio.StreamReader) -> None:
    """Returns when the client closes its end; anything it sends meanwhile is ignored."""
    while await reader.read(4096):
        pass


def _encode(response: dict[str, Any]) -> bytes:
    return json.dumps(response, default=str).encode() + b"\n"


def _describe(error: BaseException) -> str:
    return _cut(repr(error))


def _cut(text: str) -> str:
    return text if len(text) <= _ERROR_TEXT_CHARS else text[:_ERROR_TEXT_CHARS] + "..."


def request_status(path: Path, timeout_s: float = 10.0) -> dict[str, Any]:
    """Ask the controller on ``path`` for its status; StatusUnavailable if none answers."""
    response = _request(path, {"command": "status"}, timeout_s)
    if not response.get("ok"):
        error = _cut(str(response.get("error")))
        raise StatusUnavailable(f"controller on {path} refused: {error}")
    status = response.get("status")
    if not isinstance(status, dict):
        raise StatusUnavailable(f"controller on {path} sent no status")
    return status


def subscribe(
    path: Path, period_s: float = 1.0, connect_timeout_s: float = 10.0
) -> Iterator[dict[str, Any]]:
    """The messages of a subscription on ``path``, first the ``subscribed`` line; blocking.
    StatusUnavailable when no controller answers, refuses, or sends a line we cannot use;
    the iteration ends when the controller closes the stream."""
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as error:
        raise StatusUnavailable(f"cannot open a socket: {error}") from None
    with client:
        try:
            client.settimeout(connect_timeout_s)
            client.connect(str(path))
            client.sendall(_subscribe_line(period_s))
            client.settimeout(None)
        except (FileNotFoundError, ConnectionRefusedError):
            raise StatusUnavailable(f"no controller is listening on {path}") from None
        except OSError as error:
            raise StatusUnavailable(f"cannot talk to the controller on {path}: {error}") from None
        with client.makefile("rb") as lines:
            first = True
            while True:
                line = lines.readline(MAX_ANSWER_BYTES + 1)
                if not line:
                    return
                yield _stream_message(line, path, first)
                first = False


async def open_subscription(path: Path, period_s: float = 1.0) -> AsyncIterator[dict[str, Any]]:
    """``subscribe`` for an event loop: the same messages, read without blocking it."""
    try:
        reader, writer = await asyncio.open_unix_connection(str(path), limit=MAX_ANSWER_BYTES)
    except (FileNotFoundError, ConnectionRefusedError):
        raise StatusUnavailable(f"no controller is listening on {path}") from None
    except OSError as error:
        raise StatusUnavailable(f"cannot talk to the controller on {path}: {error}") from None
    try:
        writer.write(_subscribe_line(period_s))
        await writer.drain()
        first = True
        while True:
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                raise StatusUnavailable(
                    f"controller on {path} sent a line longer than {MAX_ANSWER_BYTES} bytes"
                ) from None
            if not line:
                return
            yield _stream_message(line, path, first)
            first = False
    finally:
        writer.close()


def _subscribe_line(period_s: float) -> bytes:
    return json.dumps({"command": "subscribe", "period_s": period_s}).encode() + b"\n"


def _stream_message(line: bytes, path: Path, first: bool) -> dict[str, Any]:
    """One line of a subscription as an object; the first must be the server's consent."""
    if len(line) > MAX_ANSWER_BYTES:
        raise StatusUnavailable(
            f"controller on {path} sent a line longer than {MAX_ANSWER_BYTES} bytes"
        )
    try:
        message = decode_bounded(line, max_bytes=MAX_ANSWER_BYTES, max_elements=MAX_ANSWER_ELEMENTS)
    except JsonRejected as error:
        raise StatusUnavailable(f"controller on {path} sent a malformed line: {error}") from None
    if not isinstance(message, dict):
        raise StatusUnavailable(f"controller on {path} sent a malformed line")
    if first and message.get("ok") is not True:
        error_text = _cut(str(message.get("error")))
        raise StatusUnavailable(f"controller on {path} refused the subscription: {error_text}")
    return message


def _request(path: Path, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send ``request``; the answer as an object, read within ``timeout_s`` and the bounds."""
    deadline = time.monotonic() + timeout_s
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout_s)
            client.connect(str(path))
            client.sendall(json.dumps(request).encode() + b"\n")
            answer = _read_answer(client, deadline, path)
    except (FileNotFoundError, ConnectionRefusedError):
        raise StatusUnavailable(f"no controller is listening on {path}") from None
    except OSError as error:
        raise StatusUnavailable(f"cannot talk to the controller on {path}: {error}") from None
    try:
        response = decode_bounded(
            answer, max_bytes=MAX_ANSWER_BYTES, max_elements=MAX_ANSWER_ELEMENTS
        )
    except JsonRejected as error:
        raise StatusUnavailable(f"controller on {path} sent a malformed answer: {error}") from None
    if not isinstance(response, dict):
        raise StatusUnavailable(f"controller on {path} sent a malformed answer")
    return response


def _read_answer(client: socket.socket, deadline: float, path: Path) -> bytes:
    """Everything up to the server's close, unless it is too long or too slow to arrive."""
    answer = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise StatusUnavailable(f"controller on {path} did not finish its answer in time")
        client.settimeout(remaining)
        chunk = client.recv(65536)
        if not chunk:
            return bytes(answer)
        answer += chunk
        if len(answer) > MAX_ANSWER_BYTES:
            raise StatusUnavailable(
                f"controller on {path} sent an answer longer than {MAX_ANSWER_BYTES} bytes"
            )


def _claim(path: Path) -> None:
    """Remove a stale socket file; refuse when a live server still answers on it."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    if not stat.S_ISSOCK(path.stat().st_mode):
        raise StatusSocketBusy(f"{path} exists and is not a socket; choose another --socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
            return
    raise StatusSocketBusy(f"another controller answers on {path}; choose another --socket")
