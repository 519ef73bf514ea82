"""``batch view`` as a real subprocess on a free port of 127.0.0.1, for the e2e tests that
attack it with hostile batch dirs, URLs and sockets."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from helpers.paths import REPO_ROOT


def batch_env() -> dict[str, str]:
    """The environment a ``python -m batch.cli`` of this checkout runs in."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


#: Seconds a view has to print its URL.
START_TIMEOUT = 30.0


class View:
    """``batch view ARGS --port 0`` started in its own session; its URL once it serves."""

    def __init__(self, *args: str | Path, cwd: Path, max_files: int | None = None) -> None:
        """``max_files``: the view's limit of open descriptors (``ulimit -n``)."""

        def limit() -> None:
            if max_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))

        self.process = subprocess.Popen(
            [sys.executable, "-m", "batch.cli", "view", *map(str, args), "--port", "0"],
            cwd=cwd,
            env=batch_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=limit,
        )
        assert self.process.stdout is not None
        # A view that hangs before it serves fails here, not by hanging the test.
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT)
        self.url = self.process.stdout.readline().strip() if ready else ""
        if not self.url.startswith("http://"):
            self.kill()
            raise AssertionError(f"batch view did not serve within 30 s: {self.stderr()}")
        self.base, self.token = self.url.split("/?token=")
        self.port = int(self.base.rsplit(":", 1)[1])

    def get(self, path: str, timeout: float = 10) -> tuple[int, Any]:
        """GET ``path`` (with a query) with the token: its status and parsed JSON body
        (its text when it is not JSON)."""
        url = f"{self.base}{path}&token={self.token}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.status, _parsed(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _parsed(exc.read())

    def post(self, path: str, data: bytes, timeout: float = 10) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.base}{path}", data=data, headers={"X-Batch-Token": self.token}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, _parsed(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _parsed(exc.read())

    def stop(self) -> int | None:
        """SIGTERM, and how it ended; None when it was still serving 10 s later."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(10)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stderr(self) -> str:
        """What it wrote on stderr: only once it has ended."""
        assert self.process.stderr is not None
        return self.process.stderr.read()


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")
