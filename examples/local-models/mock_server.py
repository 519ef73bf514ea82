"""A tiny mock of an OpenAI-compatible local model server (LM Studio, llama.cpp, Ollama).

Standard library only. It holds one model in "memory" at a time, as a small machine does:
a request for another model loads it (taking --load-seconds) in place of the one loaded.

    GET  /health                 {"ok": true}
    GET  /v1/models              the known models and which one is loaded
    POST /v1/chat/completions    OpenAI chat format; loads the model on first use
    POST /reset                  unload everything (what `lms unload --all` does)

Models whose name contains "broken" fail to load (HTTP 500). "mock-judge" is the judge,
resident beside the model under test: given a prompt with "Expected: X" and "Answer: Y"
lines it answers PASS or FAIL; with --flaky-judge N its first N requests get HTTP 503 (a
judge outage, for trying --retry-failed). Other models answer "What is A + B?" and
"What is A * B?"; a model whose name contains "weak" gets every multiplication wrong.

    python3 mock_server.py [--port 8765] [--port-file PATH] [--idle-exit 600]
                           [--load-seconds 0.2] [--flaky-judge N]

It listens on 127.0.0.1 only. --port 0 picks a free port (written to --port-file); the
server exits by itself after --idle-exit seconds without a request, so a forgotten one
does not live forever.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODELS = ["mock-qwen-7b", "mock-weak-3b", "mock-broken-13b", "mock-judge"]
MAX_BODY = 1 << 20


class State:
    def __init__(self, load_seconds: float, judge_failures: int) -> None:
        self.lock = threading.Lock()
        self.loaded: str | None = None
        self.load_seconds = load_seconds
        self.judge_failures = judge_failures
        self.last_request = time.monotonic()

    def load(self, model: str) -> None:
        with self.lock:
            if model != "mock-judge" and self.loaded != model:
                time.sleep(self.load_seconds)
                self.loaded = model


def answer(model: str, prompt: str) -> str:
    if model == "mock-judge":
        expected = re.search(r"^Expected:\s*(.*)$", prompt, re.M)
        given = re.search(r"^Answer:\s*(.*)$", prompt, re.M)
        same = expected and given and expected.group(1).strip() == given.group(1).strip()
        return "PASS" if same else "FAIL"
    match = re.search(r"(-?\d+)\s*([+*])\s*(-?\d+)", prompt)
    if match is None:
        return "I do not know."
    a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
    if op == "+":
        return str(a + b)
    return str(a * b + (1 if "weak" in model else 0))


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.last_request = time.monotonic()
            if self.path == "/health":
                self.send(200, {"ok": True})
            elif self.path == "/v1/models":
                data = [{"id": m, "object": "model", "loaded": m == state.loaded} for m in MODELS]
                self.send(200, {"object": "list", "data": data})
            else:
                self.send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            state.last_request = time.monotonic()
            length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self.send(400, {"error": {"message": "body is not JSON"}})
                return
            if self.path == "/reset":
                with state.lock:
                    unloaded, state.loaded = state.loaded, None
                self.send(200, {"unloaded": [unloaded] if unloaded else []})
            elif self.path == "/v1/chat/completions":
                self.chat(request)
            else:
                self.send(404, {"error": {"message": f"no route {self.path}"}})

        def chat(self, request: dict) -> None:
            model = request.get("model")
            if model not in MODELS:
                self.send(404, {"error": {"message": f"model {model!r} not found"}})
                return
            if "broken" in model:
                self.send(500, {"error": {"message": f"failed to load {model}: out of memory"}})
                return
            if model == "mock-judge":
                with state.lock:
                    outage, state.judge_failures = (
                        state.judge_failures > 0,
                        state.judge_failures - 1,
                    )
                if outage:
                    self.send(503, {"error": {"message": "judge unavailable, try again later"}})
                    return
            state.load(model)
            prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
            text = answer(model, prompt)
            if request.get("max_tokens") == 1:
                text = text[:1]
            self.send(
                200,
                {
                    "id": "chatcmpl-mock",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 1},
                },
            )

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--idle-exit", type=float, default=600.0)
    parser.add_argument("--load-seconds", type=float, default=0.2)
    parser.add_argument("--flaky-judge", type=int, default=0, metavar="N")
    args = parser.parse_args()
    state = State(args.load_seconds, args.flaky_judge)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(port))
        tmp.replace(args.port_file)
    print(f"mock server on http://127.0.0.1:{port}/v1", flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    while time.monotonic() - state.last_request < args.idle_exit:
        time.sleep(0.5)
    server.shutdown()


if __name__ == "__main__":
    main()
