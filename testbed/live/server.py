"""The live page's server: aiohttp in a thread of the testbed runner, pushing updates as
server-sent events.

Sources: the controller's status subscription (events as they happen, a status every
refresh) and, while a page is open, each host agent's ``status`` with EV tables, polled once
per refresh over its control socket. One JSON update per refresh is built and the same bytes
go to every open page; a controller event triggers an extra update at once, so a cut shows
without waiting for the next refresh. Nothing is polled for a page that is not open but the
controller's stream.

Access: bound to 127.0.0.1 unless told otherwise. There, requests must name this server in
``Host`` (a page of another site cannot reach it through a rebound DNS name) and state
changes must come as JSON from a page of this server (``Origin``), which a cross-site form
cannot send. Bound elsewhere, a token is required on every request (``?token=`` or the
``X-Live-Token`` header); the runner prints the URL that carries it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.io.control_protocol import StatusRequest
from controller.app.status_socket import StatusUnavailable, open_subscription
from testbed.agents import TransferSpec
from testbed.live.actions import Actions
from testbed.live.paths import NextHops, walk
from testbed.live.state import LiveState
from topologies.model import Topology

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: Where ``make setup`` installs the page's npm packages (testbed/live/package.json).
JS_DIR = Path(__file__).resolve().parents[2] / "build" / "live-js" / "node_modules"
#: The library files the page loads, by the name it asks for.
JS_FILES = {"cytoscape.min.js": Path("cytoscape") / "dist" / "cytoscape.min.js"}
DEFAULT_PORT = 8765
REFRESH_S = 1.0
AGENT_TIMEOUT_S = 2.0
#: Longest line an agent's status may take (EV tables of many connections).
AGENT_LINE_LIMIT = 16 << 20
MAX_REQUEST_BYTES = 16 * 1024
#: Updates queued for one page before older ones are dropped (a page only needs the newest).
PAGE_BACKLOG = 4
#: Largest transfer the page may start.
MAX_TRANSFER_BYTES = 1 << 40
MAX_TRANSFER_S = 3600.0


class LiveViewUnavailable(RuntimeError):
    """The page cannot be served (its JavaScript is not installed, or the port is taken)."""


def missing_javascript(js_dir: Path = JS_DIR) -> list[str]:
    """The library files the page needs and ``make setup`` has not installed."""
    return [name for name, path in JS_FILES.items() if not (js_dir / path).is_file()]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listen address) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LiveServer:
    """Serves the page for one run; :meth:`start` returns once it listens, :meth:`stop` ends it."""

    def __init__(
        self,
        topology: Topology,
        controller_socket: Path,
        agent_sockets: dict[str, Path],
        actions: Actions | None,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        refresh_s: float = REFRESH_S,
        js_dir: Path = JS_DIR,
        next_hops: NextHops | None = None,
        jobs: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.topology = topology
        self.controller_socket = controller_socket
        self.agent_sockets = dict(agent_sockets)
        self.actions = actions
        self.host = host
        self.port = port
        self.refresh_s = refresh_s
        self.js_dir = js_dir
        #: Asks the switches where an EV goes (None: this view cannot, the page says so).
        self.next_hops = next_hops
        #: The testbed's collective jobs now (``testbed.jobs.JobBoard.snapshot``), if any.
        self.jobs = jobs
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(18)
        #: Required on every request when set (always when not bound to loopback).
        self.token = token
        self.state = LiveState(topology, can_restart=bool(actions and actions.can_restart))
        self._layout = json.dumps(self.state.layout_json()).encode()
        self._pages: set[asyncio.Queue[bytes]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="live-action")
        # Paths get their own threads: running transfers hold the action threads for long.
        self._path_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="live-path")
        self._push_soon = False

    @property
    def url(self) -> str:
        """The page's address (with the token when one is required)."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        query = f"/?token={self.token}" if self.token else "/"
        return f"http://{shown}:{self.port}{query}"

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> str:
        """Listen (in a thread of its own); the page's URL. LiveViewUnavailable if it cannot."""
        missing = missing_javascript(self.js_dir)
        if missing:
            raise LiveViewUnavailable(
                f"the page's JavaScript is not installed ({', '.join(missing)} missing in "
                f"{self.js_dir}): run `make setup`"
            )
        self._thread = threading.Thread(target=self._run, name="live-view", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise LiveViewUnavailable(f"the live view did not start within {timeout_s:g} s")
        if self._failure is not None:
            raise LiveViewUnavailable(f"cannot serve on {self.host}:{self.port}: {self._failure}")
        return self.url

    def stop(self) -> None:
        """Close every page and the sources; returns when the thread has ended."""
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(10.0)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._path_pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # reported through start(); the runner goes on
            self._failure = error
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        app = web.Application(
            client_max_size=MAX_REQUEST_BYTES, middlewares=[self._guard_middleware()]
        )
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/js/{name}", self._javascript)
        app.router.add_get("/api/layout", self._layout_handler)
        app.router.add_get("/api/events", self._events)
        app.router.add_get("/api/path", self._path)
        app.router.add_post("/api/{op}", self._action)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            if self.port == 0:  # asked for any free port: say which
                self.port = int(runner.addresses[0][1])
            self._ready.set()
            tasks = [
                asyncio.create_task(self._follow_controller()),
                asyncio.create_task(self._refresh()),
            ]
            await self._stopping.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for page in list(self._pages):
                _offer(page, b"")  # ends each page's stream
            await runner.cleanup()

    # -- access ----------------------------------------------------------------------------------
    def _guard_middleware(self) -> Any:
        @web.middleware
        async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
            refusal = self._refusal(request)
            if refusal is not None:
                return web.json_response({"ok": False, "error": refusal}, status=403)
            return await handler(request)

        return guard

    def _refusal(self, request: web.Request) -> str | None:
        """Why ``request`` is refused, or None."""
        if self.token is not None:
            given = request.query.get("token") or request.headers.get("X-Live-Token") or ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return "a token is required (the URL the testbed printed carries it)"
        else:
            host = request.headers.get("Host", "")
            name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0][1:]
            if not is_loopback(name.strip("[]")):
                return f"this server answers to loopback names only, not {host!r}"
        if request.method == "POST":
            origin = request.headers.get("Origin")
            if origin is not None and origin.split("://", 1)[-1] != request.headers.get("Host"):
                return "cross-origin requests are refused"
            if request.content_type != "application/json":
                return "send JSON (Content-Type: application/json)"
        return None

    # -- pages -----------------------------------------------------------------------------------
    async def _index(self, _request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC_DIR / "index.html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = STATIC_DIR / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(path)

    async def _javascript(self, request: web.Request) -> web.StreamResponse:
        relative = JS_FILES.get(request.match_info["name"])
        if relative is None:
            raise web.HTTPNotFound()
        return web.FileResponse(self.js_dir / relative)

    async def _layout_handler(self, _request: web.Request) -> web.StreamResponse:
        return web.Response(body=self._layout, content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """The update stream of one page: the newest update at once, then every refresh."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
        )
        await response.prepare(request)
        page: asyncio.Queue[bytes] = asyncio.Queue(PAGE_BACKLOG)
        self._pages.add(page)
        try:
            await self._poll_agents()
            await response.write(self._update_bytes())
            while True:
                chunk = await page.get()
                if not chunk:
                    break
                await response.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._pages.discard(page)
        return response

    async def _path(self, request: web.Request) -> web.StreamResponse:
        """Where one EV of a listed transfer goes: ``?host=&qp=&ev=``."""
        try:
            host = request.query.get("host", "")
            qp, ev = int(request.query.get("qp", "")), int(request.query.get("ev", ""))
        except ValueError:
            return _answer(False, "give host, qp and ev (integers)", 400)
        if self.next_hops is None:
            return _answer(False, "this view has no switches to ask", 409)
        try:
            flow = self.state.flow_of(host, qp, ev)
        except ValueError as error:
            return _answer(False, str(error), 404)
        loop = asyncio.get_running_loop()
        path = await loop.run_in_executor(
            self._path_pool, walk, self.topology, flow, self.next_hops
        )
        return web.json_response(path.to_json())

    # -- sources ---------------------------------------------------------------------------------
    async def _follow_controller(self) -> None:
        """Keep a subscription open; on its loss say so on the page and subscribe again."""
        while True:
            try:
                async for message in open_subscription(self.controller_socket, self.refresh_s):
                    if self.state.apply_controller(message) and self._pages:
                        self._schedule_push()
                self.state.controller_lost("the controller closed its status stream")
            except StatusUnavailable as error:
                self.state.controller_lost(str(error))
            except OSError as error:
                self.state.controller_lost(f"status stream failed: {error}")
            await asyncio.sleep(1.0)

    def _schedule_push(self) -> None:
        """One extra update soon, however many events arrive together."""
        if self._push_soon or self._loop is None:
            return
        self._push_soon = True

        def push() -> None:
            self._push_soon = False
            self._broadcast()

        self._loop.call_later(0.05, push)

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            if not self._pages:
                continue
            await self._poll_agents()
            self._broadcast()

    async def _poll_agents(self) -> None:
        if self.actions is not None:
            self.state.set_cut(self.actions.cut_links())
        if self.jobs is not None:
            self.state.set_jobs(self.jobs())
        hosts = list(self.agent_sockets)
        results = await asyncio.gather(
            *(self._agent_status(self.agent_sockets[h]) for h in hosts), return_exceptions=True
        )
        for host, result in zip(hosts, results, strict=True):
            if isinstance(result, dict):
                self.state.apply_agent(host, result)
            else:
                self.state.agent_unavailable(host, _describe(result))

    async def _agent_status(self, path: Path) -> dict[str, Any]:
        """One ``status`` with EV tables from the agent on ``path``."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=AGENT_LINE_LIMIT), AGENT_TIMEOUT_S
        )
        try:
            request = StatusRequest(evs=True).to_json(1)
            writer.write(json.dumps(request).encode() + b"\n")
            line = await asyncio.wait_for(reader.readline(), AGENT_TIMEOUT_S)
        finally:
            writer.close()
        reply = json.loads(line)
        if not isinstance(reply, dict) or reply.get("ok") is not True:
            error = reply.get("error") if isinstance(reply, dict) else None
            raise RuntimeError(f"the agent refused: {error}")
        result = reply.get("result")
        if not isinstance(result, dict):
            raise RuntimeError("the agent sent no status")
        return result

    def _update_bytes(self) -> bytes:
        return b"data: " + json.dumps(self.state.update_json()).encode() + b"\n\n"

    def _broadcast(self) -> None:
        if not self._pages:
            return
        chunk = self._update_bytes()
        for page in self._pages:
            _offer(page, chunk)

    # -- actions ---------------------------------------------------------------------------------
    async def _action(self, request: web.Request) -> web.StreamResponse:
        op = request.match_info["op"]
        if self.actions is None:
            return _answer(False, "this view has no testbed to act on", 409)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _answer(False, "the body is not JSON", 400)
        if not isinstance(body, dict):
            return _answer(False, "the body must be a JSON object", 400)
        try:
            call = self._operation(op, body)
        except ValueError as error:
            return _answer(False, str(error), 400)
        loop = asyncio.get_running_loop()
        try:
            message = await loop.run_in_executor(self._pool, call)
        except Exception as error:  # the operation's own failure, as the CLI prints it
            return _answer(False, _describe(error), 409)
        if self.actions is not None:
            self.state.set_cut(self.actions.cut_links())
        self._broadcast()
        return _answer(True, message)

    def _operation(self, op: str, body: dict[str, Any]) -> Callable[[], str]:
        """The blocking call that does ``op``; ValueError for a request we do not take."""
        actions = self.actions
        assert actions is not None
        if op in ("fail", "restore"):
            a, b = _text(body, "a"), _text(body, "b")
            for end in (a, b):
                self._check_node(end.split(":", 1)[0])
            return (lambda: actions.fail(a, b)) if op == "fail" else (lambda: actions.restore(a, b))
        if op == "restart":
            switch = _text(body, "switch")
            if not actions.can_restart:
                raise ValueError("restart: this target has no switch process to restart")
            if switch not in {s.name for s in self.topology.switches}:
                raise ValueError(f"restart: no switch {switch!r}")
            return lambda: actions.restart(switch)
        if op == "transfer":
            return self._transfer(body)
        raise ValueError(f"unknown operation {op!r} (fail, restore, restart, transfer)")

    def _check_node(self, name: str) -> None:
        known = {s.name for s in self.topology.switches} | {h.name for h in self.topology.hosts}
        if name not in known:
            raise ValueError(f"no node {name!r} in {self.topology.name}")

    def _transfer(self, body: dict[str, Any]) -> Callable[[], str]:
        source, destination = _text(body, "source"), _text(body, "destination")
        hosts = {h.name for h in self.topology.hosts}
        if source not in hosts or destination not in hosts or source == destination:
            raise ValueError("transfer: choose two different hosts")
        total = _number(body, "bytes", 1, MAX_TRANSFER_BYTES)
        duration = _number(body, "duration", 0.1, MAX_TRANSFER_S)
        evs = _number(body, "evs", 1, 1 << 16)
        if total is None and duration is None:
            duration = 10.0
        spec = TransferSpec(
            source,
            destination,
            total_bytes=None if total is None else int(total),
            duration_s=None if total is not None else duration,
            evs=None if evs is None else int(evs),
        )
        record = self.state.start_transfer(source, destination)
        actions = self.actions
        assert actions is not None and self._loop is not None
        loop = self._loop

        def on_progress(sample: dict[str, Any]) -> None:
            def apply() -> None:
                record.goodput_bps = sample.get("goodput_bps")
                record.bytes_sent = int(sample.get("total_bytes") or 0)

            loop.call_soon_threadsafe(apply)

        def run() -> None:
            try:
                result = actions.transfer(spec, on_progress)
            except Exception as error:
                failure = _describe(error)
                loop.call_soon_threadsafe(_finish, record, "failed", failure, None)
                return
            loop.call_soon_threadsafe(_finish, record, "done", None, _summary(result))

        self._pool.submit(run)
        return lambda: f"transfer {record.id} started: {source} -> {destination}"


def _finish(record: Any, state: str, error: str | None, summary: dict[str, Any] | None) -> None:
    record.state = state
    record.error = error
    record.summary = summary


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("bytes", "seconds", "goodput_bps", "retransmits_total")
    return {key: result[key] for key in keys if key in result}


def _offer(page: asyncio.Queue[bytes], chunk: bytes) -> None:
    """Queue ``chunk`` for a page, dropping its oldest update when it is behind."""
    while True:
        try:
            page.put_nowait(chunk)
            return
        except asyncio.QueueFull:
            page.get_nowait()


def _answer(ok: bool, text: str, status: int = 200) -> web.Response:
    key = "message" if ok else "error"
    return web.json_response({"ok": ok, key: text}, status=status)


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value or len(value) > 64:
        raise ValueError(f"{key!r} must be a name")
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"{key!r} must be a number from {low:g} to {high:g}")
    return float(value)


def _describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if len(text) <= 300 else text[:300] + "..."
