"""``batch view``'s web app: the page, its data, live updates and the controls (docs/view.md).

A Starlette app (served by uvicorn): a well-kept ASGI toolkit whose routing, responses,
streaming and trusted-host check we use as they are, with no templating or ORM to carry.
Who gets in: only a request carrying the token (``?token=`` or the ``X-Batch-Token``
header); a control is a POST that must carry it in the header, so a page elsewhere cannot
forge one with a link or a form. The Host header must name this server (a DNS-rebinding
page cannot reach it through a name of its own). Nothing outside the batch dirs is read:
a job's files are found from its run dir, resolved and kept inside its batch dir. Every
response forbids inline script and framing, and sends no referrer (the token is in the URL).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from batch.event_segments import mark
from batch.layout import LOGS_DIR
from batch.printable import one_line
from batch.steering import (
    ANSWER_POLL,
    ANSWER_TIMEOUT,
    Answer,
    Control,
    ControlError,
    look_for_answer,
    parse_control,
    request_problem,
    write_request,
)
from batch.view.follow import BatchFollower
from batch.view.job_files import job_files
from batch.view.limits import BodyLimit
from run_support.numbers import MAX_DIGITS, whole_number

STATIC = Path(__file__).with_name("static")
#: Seconds between two looks at the batch dirs.
POLL_INTERVAL = 0.5
#: Updates queued for one page at most; a page that reads none is dropped.
QUEUE_SIZE = 64
#: An SSE comment this often keeps proxies and the browser from closing an idle stream.
KEEPALIVE = 15.0

_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenGate:
    """ASGI middleware: the token or 401/403, and the security headers on every response."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get("x-batch-token")
        query = request.query_params.get("token")
        # A control must carry the token in its header: a link or a form cannot.
        given = header if request.method != "GET" else (header or query)
        if given is None:
            status, text = 401, "a token is needed: open the URL batch view printed"
        elif not secrets.compare_digest(given.encode(), self.token.encode()):
            status, text = 403, "wrong token"
        else:
            await self.app(scope, receive, _with_headers(send))
            return
        response = Response(text + "\n", status_code=status, media_type="text/plain")
        await response(scope, receive, _with_headers(send))


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
        await send(message)

    return sending


class ViewHub:
    """The followed batches, and the pages listening for their updates."""

    def __init__(
        self,
        batch_dirs: Sequence[Path],
        secrets_: frozenset[str],
        *,
        read_only: bool,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.followers = [BatchFollower(path) for path in batch_dirs]
        self.on_tick = on_tick
        self.secrets = secrets_
        self.read_only = read_only
        self.listeners: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._said: set[str] = set()

    async def start(self) -> None:
        for follower in self.followers:
            await asyncio.to_thread(self._poll, follower)
        self._task = asyncio.create_task(self._follow())

    def _poll(self, follower: BatchFollower) -> bool:
        """``follower.poll()``; whatever a hostile batch dir makes it raise is said once on
        stderr, and the view goes on (its live updates and its ``--view`` watch with it)."""
        try:
            return follower.poll()
        except Exception as exc:
            said = f"batch view: {follower.batch_dir}: cannot read an update: {exc!r}"
            if said not in self._said:
                self._said.add(said)
                print(one_line(said), file=sys.stderr, flush=True)
            return False

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(POLL_INTERVAL)
            if self.on_tick is not None:
                self.on_tick()
            for index, follower in enumerate(self.followers):
                if not self._poll(follower):
                    continue
                update = json.dumps(
                    {
                        "batch": index,
                        "overview": overview(follower),
                        "cells": follower.view.changed_cells(),
                    }
                )
                for queue in list(self.listeners):
                    try:
                        queue.put_nowait(update)
                    except asyncio.QueueFull:  # a page that stopped reading
                        self.listeners.discard(queue)

    def follower(self, request: Request) -> BatchFollower | Response:
        """The batch ``?batch=N`` names (default 0), or the answer that it names none: 400
        for what is not a whole number (``²``, 5,000 digits), 404 past the last batch."""
        given = request.query_params.get("batch", "0")
        index = whole_number(given)
        if index is None:
            return _not_a_number("batch", given)
        if index >= len(self.followers):
            return JSONResponse({"error": "no such batch"}, status_code=404)
        return self.followers[index]


def make_app(
    batch_dirs: Sequence[Path],
    token: str,
    *,
    allowed_hosts: Sequence[str],
    secrets_: frozenset[str] = frozenset(),
    read_only: bool = False,
    on_tick: Callable[[], None] | None = None,
) -> Starlette:
    """The app serving ``batch_dirs`` to the holder of ``token``; ``on_tick`` is called
    at every look at the batch dirs."""
    hub = ViewHub(batch_dirs, secrets_, read_only=read_only, on_tick=on_tick)

    async def page(request: Request) -> Response:
        html = (STATIC / "index.html").read_text(encoding="utf-8")
        # The token goes into the page's own URLs; it is URL-safe text, nothing to escape.
        html = html.replace("TOKEN", token).replace("READONLY", "1" if read_only else "0")
        return Response(html, media_type="text/html; charset=utf-8")

    def static(name: str, media_type: str) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            return Response((STATIC / name).read_bytes(), media_type=media_type)

        return serve

    async def batches(request: Request) -> Response:
        return JSONResponse(
            {
                "batches": [f.view.name for f in hub.followers],
                "read_only": read_only,
            }
        )

    async def state(request: Request) -> Response:
        follower = hub.follower(request)
        if isinstance(follower, Response):
            return follower
        view = follower.view
        return JSONResponse(
            {"overview": overview(follower), "grid": view.cells(), "repeats": view.repeats()}
        )

    async def events(request: Request) -> Response:
        queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_SIZE)
        hub.listeners.add(queue)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 2000\n\n"
                while True:
                    try:
                        update = await asyncio.wait_for(queue.get(), KEEPALIVE)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    yield f"data: {update}\n\n"
            finally:
                hub.listeners.discard(queue)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def job(request: Request) -> Response:
        follower = hub.follower(request)
        if isinstance(follower, Response):
            return follower
        given = request.query_params.get("repeat", "1")
        repeat = whole_number(given)
        if repeat is None:
            return _not_a_number("repeat", given)
        case, model = request.query_params.get("case"), request.query_params.get("model")
        if case is None or model is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        found = follower.view.job((case, model, repeat))
        if found is None:
            return JSONResponse({"error": "no such job"}, status_code=404)
        files = await asyncio.to_thread(
            job_files, follower.batch_dir, found.get("run_dir"), hub.secrets
        )
        return JSONResponse({"job": found, **files})

    async def control(request: Request) -> Response:
        if read_only:
            return JSONResponse({"error": "this view is read-only"}, status_code=403)
        follower = hub.follower(request)
        if isinstance(follower, Response):
            return follower
        try:
            body = await request.body()
            raw = json.loads(body[:4096]) if len(body) <= 4096 else None
            if not isinstance(raw, dict):
                raise ControlError("a control is a JSON object of at most 4 KiB")
            request_control = parse_control({**raw, "source": "batch view"})
        except (ValueError, ControlError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        state, said = await _send(follower.batch_dir, request_control)
        return JSONResponse(said, status_code=409 if state is Answer.REFUSED else 200)

    routes = [
        Route("/", page),
        Route("/static/view.js", static("view.js", "text/javascript; charset=utf-8")),
        Route("/static/view.css", static("view.css", "text/css; charset=utf-8")),
        Route("/static/icon.svg", static("icon.svg", "image/svg+xml")),
        Route("/api/batches", batches),
        Route("/api/state", state),
        Route("/api/events", events),
        Route("/api/job", job),
        Route("/api/control", control, methods=["POST"]),
    ]

    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await hub.start()
        try:
            yield
        finally:
            await hub.stop()

    return Starlette(
        routes=routes,
        middleware=[
            Middleware(BodyLimit),
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
            Middleware(TokenGate, token=token),
        ],
        lifespan=_lifespan(lifespan),
    )


def _lifespan(
    body: Callable[[Starlette], AsyncIterator[None]],
) -> Callable[[Starlette], Any]:
    import contextlib

    return contextlib.asynccontextmanager(body)


#: The states of a batch whose driver may still take a control.
STEERABLE_STATES = ("running", "stopping")


def overview(follower: BatchFollower) -> dict[str, Any]:
    """The page's top part, and whether a driver can take a control now (``steerable``):
    the batch is running and a live driver holds its lock. A finished or dead batch's page
    offers no control, and says why."""
    from batch.plan.lock import running_driver

    found = follower.view.overview(_now())
    found["steerable"] = (
        found["state"] in STEERABLE_STATES and running_driver(follower.batch_dir) is not None
    )
    return found


async def _send(batch_dir: Path, control: Control) -> tuple[Answer, dict[str, Any]]:
    """Leave ``control`` for the driver and wait for its answer in ``events.jsonl``: how it
    ended (:func:`batch.steering.answer_state`) and what the page is told."""
    from batch.plan.lock import running_driver

    if running_driver(batch_dir) is None:
        return Answer.REFUSED, {"outcome": "refused", "message": "no driver is running this batch"}
    start = mark(batch_dir / LOGS_DIR)
    try:
        path = write_request(batch_dir, control)
    except OSError as exc:  # batch-logs/control a symlink, a file, unwritable
        return Answer.REFUSED, {"outcome": "refused", "message": request_problem(exc)}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_TIMEOUT
    while True:
        state, said = look_for_answer(
            path, batch_dir / LOGS_DIR, start, control, now=loop.time(), deadline=deadline
        )
        if state is not Answer.WAITING:
            break
        await asyncio.sleep(ANSWER_POLL)
    queued = {"outcome": "queued", "message": "the driver has not taken it yet"}
    return state, queued if said is None else said


def _not_a_number(name: str, given: str) -> Response:
    shown = one_line(given[:40]) + ("..." if len(given) > 40 else "")
    message = f"{name}: {shown!r} is not a whole number (at most {MAX_DIGITS} digits 0-9)"
    return JSONResponse({"error": message}, status_code=400)


def _now() -> float:
    import time

    return time.time()


def new_token() -> str:
    return secrets.token_urlsafe(24)


def allowed_hosts(host: str, port: int) -> list[str]:
    """The Host header values this server answers to: the address it binds and, for a
    loopback one, ``localhost``."""
    del port  # TrustedHostMiddleware compares the host part only
    if host in ("0.0.0.0", "::", ""):
        # Every address of the machine: any name may reach it, and the token is the guard.
        return ["*"]
    names = {host}
    if host in ("127.0.0.1", "::1", "localhost"):
        names |= {"127.0.0.1", "localhost", "::1", "[::1]"}
    return sorted(names)


def environ_secrets() -> frozenset[str]:
    """What the view redacts besides a sweep's literal secrets: the values of
    secret-named variables in its own environment (as the driver does)."""
    from batch.sweep.secrets import secret_values

    return frozenset(secret_values(environ=os.environ))
