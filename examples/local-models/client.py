"""A minimal OpenAI-compatible client for this example's steps (standard library only).

The server is ``$BASE_URL`` (default ``http://127.0.0.1:8765/v1``, the bundled mock); a real
local server (LM Studio, llama.cpp, Ollama) works the same way. Used as a module by
``eval.py`` and ``judge.py``, and as the sweep's reset and probe commands::

    python3 client.py reset           # POST <server>/reset (the mock's "unload everything")
    python3 client.py probe MODEL     # a one-token request: exit 0 when MODEL answers

Every request has a timeout and at most ``ATTEMPTS`` tries, so nothing here loops forever.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

DEFAULT_BASE_URL = "http://127.0.0.1:8765/v1"
ATTEMPTS = 3
TIMEOUT = 120.0


class ApiError(Exception):
    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


def base_url() -> str:
    return os.environ.get("BASE_URL", DEFAULT_BASE_URL).rstrip("/")


def post(url: str, body: dict, timeout: float = TIMEOUT) -> dict:
    """POST JSON, retrying a refused connection a bounded number of times."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = exc.reason
            raise ApiError(exc.code, str(message)) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            if attempt == ATTEMPTS:
                raise ApiError(None, f"cannot reach {url}: {exc}") from None
            time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def chat(model: str, prompt: str, *, max_tokens: int = 64) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    reply = post(f"{base_url()}/chat/completions", body)
    return str(reply["choices"][0]["message"]["content"]).strip()


def fail(exc: ApiError) -> None:
    """Exit for an API problem: the driver records it as a non-model failure."""
    print(f"API error: {exc}", flush=True)  # "HTTP 429: ..." also matches log_patterns
    sys.exit(3)


def main(argv: list[str]) -> None:
    if argv[:1] == ["reset"]:
        root = base_url().removesuffix("/v1")
        try:
            print("reset:", post(f"{root}/reset", {}, timeout=30), flush=True)
        except ApiError as exc:
            fail(exc)
    elif argv[:1] == ["probe"] and len(argv) == 2:
        try:
            print("probe:", repr(chat(argv[1], "Say OK.", max_tokens=1)), flush=True)
        except ApiError as exc:
            fail(exc)
    else:
        sys.exit("usage: client.py reset | client.py probe MODEL")


if __name__ == "__main__":
    main(sys.argv[1:])
