"""A rate-limited mock model API on 127.0.0.1, and a job that calls it.

The server answers ``POST /v1/complete`` after ``latency`` seconds while its token bucket
(``rate`` tokens a second, at most ``burst`` saved up) has a token, and ``429 Too Many
Requests`` at once when it has none — as a provider's rate limit does. A refused request
takes no token. ``GET /stats`` returns ``{"served": N, "limited": N, "by_caller": {NAME:
{"served": N, "limited": N}}}`` (a job names itself with ``--caller``; several sweeps
sharing one key are told apart so); ``served_span`` has when the first and the latest
request were served (``time.monotonic()``, in the server's process).

In a test::

    with serve(rate=4, burst=4, latency=0.05) as api:
        ...  # jobs call api.url; api.stats() counts what they got

As a script (for ``bench/`` or by hand), it prints its URL and serves until killed::

    python tests/helpers/mock_api.py serve --rate 4 --burst 4 --latency 0.05

The job side, run as a sweep's command (``{case}`` only names the call)::

    python tests/helpers/mock_api.py call URL --calls 3

makes ``calls`` requests one after another and exits 0 (passed) when all were answered; on
the first 429 it reports ``api_or_credit`` through ``run_support.results.write_result`` and
exits 1, as a harness does that gives up on a rate-limited call (the work it did is lost).
Stdlib only (plus ``run_support`` for the report), so it starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` kept; thread-safe."""

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst = rate, burst
        self._clock = clock
        self._tokens = burst
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take one token if there is one."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


class MockApi(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, bucket: TokenBucket, latency: float, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.bucket = bucket
        self.latency = latency
        self.served = 0
        self.limited = 0
        self.by_caller: dict[str, dict[str, int]] = {}
        #: ``time.monotonic()`` of the first and the latest request served.
        self.served_span: tuple[float, float] | None = None
        self.counts_lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stats(self) -> dict[str, Any]:
        with self.counts_lock:
            return {
                "served": self.served,
                "limited": self.limited,
                "by_caller": {name: dict(counts) for name, counts in self.by_caller.items()},
                "served_span": self.served_span,
            }

    def count(self, caller: str, outcome: str) -> None:
        with self.counts_lock:
            if outcome == "served":
                self.served += 1
                now = time.monotonic()
                first = now if self.served_span is None else self.served_span[0]
                self.served_span = (first, now)
            else:
                self.limited += 1
            counts = self.by_caller.setdefault(caller, {"served": 0, "limited": 0})
            counts[outcome] += 1


class _Handler(BaseHTTPRequestHandler):
    server: MockApi

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        caller = self.headers.get("X-Caller") or ""
        if not self.server.bucket.take():
            self.server.count(caller, "limited")
            self._reply(429, {"error": "rate limit exceeded"}, {"Retry-After": "1"})
            return
        time.sleep(self.server.latency)
        self.server.count(caller, "served")
        self._reply(200, {"completion": "ok"})

    def do_GET(self) -> None:
        self._reply(200, self.server.stats())

    def _reply(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a sweep makes hundreds of requests."""


@contextlib.contextmanager
def serve(rate: float, burst: float, latency: float = 0.0) -> Iterator[MockApi]:
    """The server on a free port, in a background thread, for the ``with`` block."""
    server = MockApi(TokenBucket(rate, burst), latency)
    # shutdown() waits for serve_forever to poll: at its default 0.5 s, half a second a test.
    thread = threading.Thread(
        target=server.serve_forever, args=(0.01,), name="mock-api", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# --- the job side ------------------------------------------------------------------------


def call(url: str, calls: int, caller: str = "") -> int:
    """The job: ``calls`` requests; exit status 0, or 1 after reporting a 429."""
    for number in range(1, calls + 1):
        request = urllib.request.Request(
            f"{url}/v1/complete", data=b"{}", method="POST", headers={"X-Caller": caller}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            if exc.code != 429:
                raise
            from run_support.results import write_result

            print(f"HTTP 429 on call {number} of {calls}: rate limit exceeded", flush=True)
            write_result(None, "failed", "api_or_credit", call=number)
            return 1
    print(f"{calls} calls answered", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    server = sub.add_parser("serve", help="serve until killed; print the URL first")
    server.add_argument("--rate", type=float, required=True, help="tokens a second")
    server.add_argument("--burst", type=float, required=True, help="tokens saved up at most")
    server.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    server.add_argument("--port", type=int, default=0)
    job = sub.add_parser("call", help="the job: call the server, report a 429")
    job.add_argument("url")
    job.add_argument("--calls", type=int, default=1)
    job.add_argument("--caller", default="", help="a name the server counts requests by")
    args = parser.parse_args(argv)
    if args.command == "call":
        return call(args.url, args.calls, args.caller)
    api = MockApi(TokenBucket(args.rate, args.burst), args.latency, args.port)
    print(api.url, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        api.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
