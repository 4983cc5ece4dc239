"""A subscription on the status socket: the first line consents and carries the feed's hello,
then every event-log record as it is written and a status every period, until the client
hangs up; bad periods and servers without a feed refuse; a subscriber that falls behind is
told and dropped, and the others keep their stream."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from pathlib import Path

import pytest

from controller.app.eventlog import EventLog
from controller.app.status_socket import (
    SUBSCRIBER_BACKLOG,
    EventFeed,
    StatusUnavailable,
    open_subscription,
    parse_request,
    request_status,
    serve_status,
    subscribe,
)
from tests.unit.controller.fakes import FakeClock


def _counting_status():
    calls = {"n": 0}

    async def status() -> dict:
        calls["n"] += 1
        return {"topology": "t", "n": calls["n"]}

    return status, calls


def test_events_and_statuses_arrive_in_order_after_the_consent(tmp_path):
    path = tmp_path / "ctl.sock"
    status, _calls = _counting_status()

    async def main():
        feed = EventFeed(hello={"topology": {"name": "t"}})
        log = EventLog(io.StringIO(), FakeClock())
        log.add_listener(feed.publish)
        server = await serve_status(path, status, feed)
        try:
            stream = open_subscription(path, period_s=0.2)
            first = await anext(stream)
            second = await anext(stream)  # the first status goes out at once
            log.emit("link_down", link="a:1<->b:1", where=Path("/x"))
            kinds = []
            while "event" not in kinds:
                kinds.append((await anext(stream))["kind"])
            statuses = []
            while len(statuses) < 2:
                message = await anext(stream)
                if message["kind"] == "status":
                    statuses.append(message["status"]["n"])
            await stream.aclose()
            return first, second, statuses
        finally:
            server.close()
            await server.wait_closed()

    first, second, statuses = asyncio.run(main())
    assert first == {"ok": True, "kind": "subscribed", "period_s": 0.2, "topology": {"name": "t"}}
    assert second == {"kind": "status", "status": {"topology": "t", "n": 1}}
    assert statuses == sorted(statuses) and statuses[0] >= 2


def test_the_event_line_carries_the_record_as_json(tmp_path):
    path = tmp_path / "ctl.sock"
    status, _ = _counting_status()

    async def main():
        feed = EventFeed()
        log = EventLog(io.StringIO(), FakeClock())
        log.add_listener(feed.publish)
        server = await serve_status(path, status, feed)
        try:
            stream = open_subscription(path, period_s=60)
            await anext(stream)
            await anext(stream)
            log.emit("failover", trigger=("a", "b"), where=Path("/x"))
            event = await anext(stream)
            await stream.aclose()
            return event
        finally:
            server.close()
            await server.wait_closed()

    event = asyncio.run(main())["event"]
    assert event["event"] == "failover"
    assert event["trigger"] == ["a", "b"] and event["where"] == "/x"
    assert {"ts", "mono"} <= set(event)


def test_a_blocking_subscriber_reads_the_same_stream(tmp_path):
    path = tmp_path / "ctl.sock"
    status, _ = _counting_status()

    def body():
        stream = subscribe(path, period_s=0.2)
        messages = [next(stream), next(stream), next(stream)]
        stream.close()
        return messages, request_status(path)

    async def main():
        server = await serve_status(path, status, EventFeed())
        try:
            return await asyncio.to_thread(body)
        finally:
            server.close()
            await server.wait_closed()

    messages, plain = asyncio.run(main())
    assert [m["kind"] for m in messages] == ["subscribed", "status", "status"]
    assert messages[1]["status"]["n"] < messages[2]["status"]["n"]
    assert plain["topology"] == "t"  # one-shot requests still work beside subscriptions


@pytest.mark.parametrize("period", [0, 0.01, 61, "1", True, None])
def test_a_bad_period_is_refused(period):
    line = json.dumps({"command": "subscribe", "period_s": period}).encode()
    with pytest.raises(ValueError, match="period_s"):
        parse_request(line)


def test_subscribe_is_a_known_command():
    assert parse_request(b'{"command": "subscribe"}') == "subscribe"
    assert parse_request(b'{"command": "subscribe", "period_s": 2}') == "subscribe"


def test_a_server_without_a_feed_refuses_a_subscription(tmp_path):
    path = tmp_path / "ctl.sock"
    status, _ = _counting_status()

    def body():
        with pytest.raises(StatusUnavailable, match="no subscriptions"):
            next(subscribe(path))
        return request_status(path)

    async def main():
        server = await serve_status(path, status)
        try:
            return await asyncio.to_thread(body)
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(main())["topology"] == "t"


def test_no_controller_is_unavailable(tmp_path):
    with pytest.raises(StatusUnavailable, match="no controller"):
        next(subscribe(tmp_path / "none.sock"))


def test_a_subscriber_that_falls_behind_is_told_and_dropped_and_others_go_on(tmp_path):
    path = tmp_path / "ctl.sock"
    status, _ = _counting_status()

    async def main():
        feed = EventFeed()
        server = await serve_status(path, status, feed)
        try:
            good = open_subscription(path, period_s=60)
            await anext(good)
            await anext(good)
            # A client that subscribes and never reads: its socket buffer fills, then its queue.
            stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.connect(str(path))
            stuck.sendall(b'{"command": "subscribe", "period_s": 60}\n')
            while len(feed._subscribers) < 2:
                await asyncio.sleep(0.01)
            padding = "x" * 2000
            batch = 64
            for start in range(0, SUBSCRIBER_BACKLOG * 3, batch):
                for index in range(start, start + batch):
                    feed.publish({"event": "e", "index": index, "padding": padding})
                for index in range(start, start + batch):
                    message = await anext(good)
                    assert message["event"]["index"] == index

            def read_until_error() -> bytes:
                stuck.settimeout(30)
                received = b""
                while b'"kind": "error"' not in received:
                    chunk = stuck.recv(1 << 20)
                    if not chunk:
                        break
                    received += chunk
                return received

            received = await asyncio.to_thread(read_until_error)
            stuck.close()
            await good.aclose()
            return received
        finally:
            server.close()
            await server.wait_closed()

    received = asyncio.run(main())
    assert b'"kind": "error"' in received and b"too slow" in received
