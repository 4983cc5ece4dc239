"""The live page's server: aiohttp in a thread of the testbed runner, pushing updates as
server-sent events.

Its data comes from :mod:`testbed.live.sources` (the controller's stream always, the agents
only while a page is open); its buttons go to :mod:`testbed.live.actions`. One JSON update per
refresh is built and the same bytes go to every open page; a controller event triggers an
extra update at once, so a cut shows without waiting for the next refresh.

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

from testbed.live.actions import ActionRequests, Actions
from testbed.live.paths import NextHops, walk
from testbed.live.sources import AgentPoller, follow_controller
from testbed.live.state import LiveState, describe_error
from topologies.model import Topology

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: Where ``make setup`` installs the page's npm packages (testbed/live/package.json).
JS_DIR = Path(__file__).resolve().parents[2] / "build" / "live-js" / "node_modules"
#: The library files the page loads, by the name it asks for.
JS_FILES = {"cytoscape.min.js": Path("cytoscape") / "dist" / "cytoscape.min.js"}
DEFAULT_PORT = 8765
REFRESH_S = 1.0
MAX_REQUEST_BYTES = 16 * 1024
#: Updates queued for one page before older ones are dropped (a page only needs the newest).
PAGE_BACKLOG = 4
#: How soon after a controller event the extra update goes out (events come in bursts).
PUSH_DELAY_S = 0.05


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
        controller_socket: Path | Callable[[], Path],
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
        self.host = host
        self.port = port
        self.refresh_s = refresh_s
        self.js_dir = js_dir
        #: Asks the switches where an EV goes (None: this view cannot, the page says so).
        self.next_hops = next_hops
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(18)
        #: Required on every request when set (always when not bound to loopback).
        self.token = token
        self.state = LiveState(topology, can_restart=bool(actions and actions.can_restart))
        self._poller = AgentPoller(
            self.state,
            agent_sockets,
            actions.cut_links if actions is not None else None,
            jobs,
            actions.controllers if actions is not None else None,
        )
        #: None: this view has no testbed to act on.
        self._requests = None if actions is None else ActionRequests(topology, actions, self.state)
        self._layout = json.dumps(self.state.layout_json()).encode()
        self._pages: set[asyncio.Queue[bytes]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
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
        if self._requests is not None:
            self._requests.close()
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
                asyncio.create_task(
                    follow_controller(
                        self.controller_socket, self.refresh_s, self.state, self._controller_event
                    )
                ),
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
            await self._poller.poll()
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

    # -- pushing updates -------------------------------------------------------------------------
    def _controller_event(self) -> None:
        if self._pages:
            self._schedule_push()

    def _schedule_push(self) -> None:
        """One extra update soon, however many events arrive together."""
        if self._push_soon or self._loop is None:
            return
        self._push_soon = True

        def push() -> None:
            self._push_soon = False
            self._broadcast()

        self._loop.call_later(PUSH_DELAY_S, push)

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            if not self._pages:
                continue
            await self._poller.poll()
            self._broadcast()

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
        if self._requests is None:
            return _answer(False, "this view has no testbed to act on", 409)
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _answer(False, "the body is not JSON", 400)
        if not isinstance(body, dict):
            return _answer(False, "the body must be a JSON object", 400)
        try:
            call = self._requests.prepare(op, body)
        except ValueError as error:
            return _answer(False, str(error), 400)
        try:
            message = await self._requests.perform(call)
        except Exception as error:  # the operation's own failure, as the CLI prints it
            return _answer(False, describe_error(error), 409)
        self._broadcast()
        return _answer(True, message)


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
