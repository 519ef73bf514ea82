"""The bounds of ``batch view``'s server: connections, idle time, request size, log lines.

Anyone who can reach the port can open connections, token or not. Left to uvicorn's
defaults, a connection that never sends a request is kept for ever (its keep-alive
timeout starts only after a first response), so ~1,100 idle sockets exhaust a process's
usual 1,024 descriptors: the page is unreachable and asyncio logs every failed accept.
Here, in the server's own settings:

- a connection gets :data:`HEADER_TIMEOUT` seconds to send a whole request head, at its
  start and after each response (uvicorn's keep-alive timeout, :data:`KEEP_ALIVE`, is
  cancelled by the first byte; this one is not, so a byte at a time does not hold it);
- past :data:`MAX_CONNECTIONS` open, a new connection closes the oldest one that has no
  request in flight (an open page's event stream is a request in flight: it stays), and
  uvicorn's ``limit_concurrency`` answers 503 past that many;
- a request head is at most :data:`MAX_HEAD_BYTES` (h11), and a body at most
  :data:`MAX_BODY_BYTES`: a larger ``Content-Length`` is refused (413) before a byte of
  it is read, a chunked one once it passes the bound, and one not sent whole within
  :data:`HEADER_TIMEOUT` is refused too (408) (:class:`BodyLimit`);
- a warning uvicorn or asyncio repeats is logged once a minute (:class:`OncePerMinute`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "ACCEPT_BATCH",
    "HEADER_TIMEOUT",
    "KEEP_ALIVE",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "BodyLimit",
    "BoundedH11Protocol",
    "OncePerMinute",
    "server_config",
]

#: Seconds a connection has to send a whole request head.
HEADER_TIMEOUT = 10.0
#: Seconds an idle connection is kept after a response (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE = 5
#: Connections kept open at most; past it the oldest idle one is closed.
MAX_CONNECTIONS = 200
#: Connections accepted in one go (and the listen backlog).
ACCEPT_BATCH = 64
#: Bytes of a request head (line and headers) at most.
MAX_HEAD_BYTES = 16 * 1024
#: Bytes of a request body at most: a control is a JSON object of at most 4 KiB.
MAX_BODY_BYTES = 4096

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head and a cap on idle
    connections (this module's docstring)."""

    def connection_made(self, transport: Any) -> None:
        _close_oldest_idle(self.connections)
        super().connection_made(transport)
        self.opened = time.monotonic()
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        # The scope is replaced by each request head read: the same one at the deadline
        # means no head came in time.
        waiting_for = self.scope
        self.loop.call_later(HEADER_TIMEOUT, self._head_deadline, waiting_for)

    def _head_deadline(self, waiting_for: object) -> None:
        if self.scope is waiting_for and self.idle():
            self.timeout_keep_alive_handler()

    def idle(self) -> bool:
        """No request in flight: none read yet, or the last one answered."""
        return self.cycle is None or self.cycle.response_complete

    def still_open(self) -> bool:
        """Not closed already (a closed one stays in the set until the loop drops it)."""
        return not self.transport.is_closing()


def _close_oldest_idle(connections: set[Any]) -> None:
    """Past :data:`MAX_CONNECTIONS` open, close the oldest one with no request in flight."""
    mine = [c for c in connections if isinstance(c, BoundedH11Protocol) and c.still_open()]
    if len(mine) < MAX_CONNECTIONS:
        return
    idle = [c for c in mine if c.idle()]
    if idle:
        min(idle, key=lambda c: c.opened).timeout_keep_alive_handler()


class BodyLimit:
    """ASGI middleware: a request body past :data:`MAX_BODY_BYTES` is answered 413 and
    never reaches the app: before a byte is read when its ``Content-Length`` says so,
    else (chunked) as soon as it passes the bound. A body within it is read here and
    handed on whole."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or len(declared) > 12 or int(declared) > MAX_BODY_BYTES:
            await _refuse(send, 413, TOO_LARGE)
            return
        pieces: list[bytes] = []
        size, more = 0, True
        deadline = asyncio.get_running_loop().time() + HEADER_TIMEOUT
        while more:
            try:
                async with asyncio.timeout_at(deadline):  # a body sent a byte at a time
                    message = await receive()
            except TimeoutError:
                await _refuse(send, 408, f"a request body is sent within {HEADER_TIMEOUT:.0f} s")
                return
            if message["type"] != "http.request":  # the client left
                await self.app(scope, _replay([], message, receive), send)
                return
            pieces.append(message.get("body", b""))
            size += len(pieces[-1])
            more = message.get("more_body", False)
            if size > MAX_BODY_BYTES:
                await _refuse(send, 413, TOO_LARGE)
                return
        whole = {"type": "http.request", "body": b"".join(pieces), "more_body": False}
        await self.app(scope, _replay([whole], None, receive), send)


def _replay(first: list[Message], then: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that gives ``first``, then ``then``, then what ``receive`` gives."""
    queued = [*first, *([then] if then is not None else [])]

    async def replayed() -> Message:
        return queued.pop(0) if queued else await receive()

    return replayed


TOO_LARGE = f"a request body is at most {MAX_BODY_BYTES:,} bytes"


async def _refuse(send: Send, status: int, text: str) -> None:
    body = f"{text}\n".encode()
    headers = [
        (b"content-type", b"text/plain"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class OncePerMinute(logging.Filter):
    """Passes each distinct message at most once a minute: a flood of bad connections
    costs a line, not a line each."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key, now = str(record.msg), self._clock()
        if now - self._last.get(key, -60.0) < 60.0:
            return False
        self._last[key] = now
        if len(self._last) > 1000:  # messages carrying addresses: keep the table small
            self._last.clear()
        return True


def server_config(app: ASGIApp) -> uvicorn.Config:
    """The view's uvicorn settings, with the bounds above."""
    once = OncePerMinute()
    for name in ("uvicorn.error", "asyncio"):
        logging.getLogger(name).addFilter(once)
    return uvicorn.Config(
        app,
        http=BoundedH11Protocol,
        # Past the connections kept (all with a request in flight, none idle to close).
        limit_concurrency=MAX_CONNECTIONS + 1,
        # Connections accepted at a time before the protocol sees them: with uvicorn's
        # 2,048, a burst of idle ones runs past 1,024 descriptors before any is closed.
        backlog=ACCEPT_BATCH,
        timeout_keep_alive=KEEP_ALIVE,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        log_level="warning",
        access_log=False,
        lifespan="on",
        # An open page holds its event stream: a stop waits this long for it, then closes it.
        timeout_graceful_shutdown=1,
    )
