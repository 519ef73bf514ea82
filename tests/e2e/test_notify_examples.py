"""examples/notify: the webhook notifier against a local receiver, the desktop one on PATH.

The receiver listens on 127.0.0.1 on a port the OS picks; nothing here reaches the internet.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from batch.notify.commands import notify
from batch.notify.payload import event_payload
from batch.sweep.features.notify import NotifySpec
from batch.sweep.secrets import REDACTED, redactor

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "notify"
WEBHOOK = EXAMPLES / "webhook.py"
DESKTOP = EXAMPLES / "desktop.sh"

EVENT = {
    "event": "end",
    "batch_id": "nightly-1",
    "state": "complete",
    "message": "nightly-1 complete: 3 passed, 1 error",
}


class Receiver:
    """A local HTTP endpoint that answers ``status`` (after ``delay``) and keeps what it got."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        self.status, self.delay = status, delay
        self.requests: list[dict[str, Any]] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        # shutdown() waits for serve_forever to poll: at its default 0.5 s, half a second a test.
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def webhook(
    *args: str, event: dict[str, Any] = EVENT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WEBHOOK), *args],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=10,
    )


class TestWebhook:
    def test_posts_the_event_as_json(self, receiver: Receiver) -> None:
        done = webhook(receiver.url)
        assert done.returncode == 0, done.stderr
        [got] = receiver.requests
        assert got["path"] == "/hook"
        assert got["headers"]["Content-Type"] == "application/json"
        assert json.loads(got["body"]) == EVENT

    def test_slack_format_sends_the_message_as_text(self, receiver: Receiver) -> None:
        assert webhook(receiver.url, "--format", "slack").returncode == 0
        assert json.loads(receiver.requests[0]["body"]) == {"text": EVENT["message"]}

    def test_text_format_url_and_token_from_the_environment(self, receiver: Receiver) -> None:
        env = {"BATCH_WEBHOOK_URL": receiver.url, "BATCH_WEBHOOK_TOKEN": "tk-123456"}
        assert webhook("--format", "text", env=env).returncode == 0
        [got] = receiver.requests
        assert got["body"].decode() == EVENT["message"]
        assert got["headers"]["Authorization"] == "Bearer tk-123456"
        assert got["headers"]["Title"] == "batch end: nightly-1"

    def test_an_error_answer_fails_with_the_status(self) -> None:
        with Receiver(status=500) as failing:
            done = webhook(failing.url)
        assert done.returncode == 1
        assert "answered 500" in done.stderr

    def test_the_url_path_is_never_printed(self, receiver: Receiver) -> None:
        # A Slack webhook's path is its secret, and the output lands in notify.log.
        secret_url = receiver.url + "/T000/B000/XXXXsecretXXXX"
        done = webhook(secret_url)
        assert done.returncode == 0
        assert "XXXXsecretXXXX" not in done.stdout + done.stderr
        assert f"{receiver.url.removesuffix('/hook')} answered 200" in done.stdout
        with Receiver(status=403) as failing:
            done = webhook(failing.url + "/T000/B000/XXXXsecretXXXX")
        assert done.returncode == 1
        assert "XXXXsecretXXXX" not in done.stdout + done.stderr

    def test_an_unreachable_endpoint_fails(self) -> None:
        with socket.socket() as sock:  # a port that was free a moment ago, now closed
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        done = webhook(f"http://127.0.0.1:{port}/hook")
        assert done.returncode == 1
        assert "cannot reach" in done.stderr

    def test_a_slow_endpoint_hits_the_timeout(self) -> None:
        with Receiver(delay=3.0) as slow:
            started = time.monotonic()
            done = webhook(slow.url, "--timeout", "0.3")
        assert done.returncode == 1
        assert time.monotonic() - started < 2.5
        assert "cannot reach" in done.stderr

    def test_no_url_is_a_clear_failure(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "BATCH_WEBHOOK_URL"}
        done = subprocess.run(
            [sys.executable, str(WEBHOOK)], input="{}", capture_output=True, text=True, env=env
        )
        assert done.returncode == 1
        assert "no URL" in done.stderr

    def test_as_a_notify_command_with_a_secret_redacted(
        self, receiver: Receiver, tmp_path: Path
    ) -> None:
        secret = "sk-live-abcdef0123456789"
        payload = event_payload(
            "halt",
            batch_dir=tmp_path / "nightly-1",
            state="halted",
            statuses=["passed", "error"],
            message=f"halted: budget reached (key {secret})",
            stamp="2026-11-30T10:00:00Z",
        )
        spec = NotifySpec(((sys.executable, str(WEBHOOK), receiver.url),))
        [result] = asyncio.run(
            notify(
                spec,
                payload,
                base_env=os.environ,
                cwd=tmp_path,
                log_path=tmp_path / "notify.log",
                redact=redactor([secret]),
            )
        )
        assert result.ok, (tmp_path / "notify.log").read_text()
        sent = json.loads(receiver.requests[0]["body"])
        assert sent["event"] == "halt" and sent["counts"]["error"] == 1
        assert sent["message"] == f"halted: budget reached (key {REDACTED})"


class TestDesktop:
    ENV = {
        "BATCH_EVENT": "stall",
        "BATCH_ID": "nightly-1",
        "BATCH_MESSAGE": "no job finished for 30m",
    }

    def test_prints_when_there_is_no_notify_send(self, tmp_path: Path) -> None:
        env = {**os.environ, **self.ENV, "PATH": str(tmp_path)}
        done = subprocess.run(["/bin/sh", str(DESKTOP)], capture_output=True, text=True, env=env)
        assert done.returncode == 0
        assert done.stdout == "batch stall: nightly-1\nno job finished for 30m\n"

    def test_uses_notify_send_when_present(self, tmp_path: Path) -> None:
        # notify-send needs a desktop session, which a test machine lacks: a stand-in
        # on PATH records its arguments.
        fake = tmp_path / "notify-send"
        fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/args\n')
        fake.chmod(0o755)
        env = {**os.environ, **self.ENV, "PATH": f"{tmp_path}:/usr/bin:/bin"}
        done = subprocess.run(["/bin/sh", str(DESKTOP)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "args").read_text().splitlines() == [
            "--urgency=critical",
            "--app-name=batch",
            "batch stall: nightly-1",
            "no job finished for 30m",
        ]
