"""A warm worker for the tests (docs/worker.md): each request's ``params.do`` says what to do.

Run as ``python fake_worker.py DIR``. At start it appends its pid to ``DIR/starts`` and
writes ``DIR/worker-<pid>``; with ``FAKE_WORKER_BROKEN`` set it prints that to stderr and
exits 1 before reading a request. At end of input it writes ``DIR/eof-<pid>``.

``params.do`` (default ``pass``): ``pass``, ``fail``, ``crash`` (a line on stderr, exit 3;
``crash_attempt: N`` only on attempt N), ``hang`` (never answers), ``garbage`` (lines on
stdout that are not answers, then a pass), ``wrong-id``, ``invalid`` (outcome ``maybe``),
``exit-after`` (answers, then exits), ``hold`` (waits while ``DIR/gate`` exists, then
passes), ``blank-lines`` (``mib: N``: N MiB of empty lines on stdout, then a pass). Every
request is appended to ``DIR/served`` as ``case repeat attempt
BATCH_REPEAT-from-env pid``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from run_support.worker import answer, requests

FAKE_WORKER = Path(__file__).resolve()


def main(directory: Path) -> int:
    pid = os.getpid()
    with open(directory / "starts", "a") as starts:
        starts.write(f"{pid}\n")
    (directory / f"worker-{pid}").write_text(str(pid))
    broken = os.environ.get("FAKE_WORKER_BROKEN")
    if broken:
        print(broken, file=sys.stderr)
        return 1
    print(f"fake worker {pid} ready", file=sys.stderr)
    for request in requests():
        params = request.get("params") or {}
        do = params.get("do", "pass")
        with open(directory / "served", "a") as served:
            env = request.get("env") or {}
            served.write(
                f"{request['case']} {request['repeat']} {request['attempt']} "
                f"{env.get('BATCH_REPEAT')} {pid}\n"
            )
        print(f"serving {request['case']}", file=sys.stderr)
        if do == "crash" and params.get("crash_attempt", request["attempt"]) == request["attempt"]:
            print("Traceback: harness exploded on " + request["case"], file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)
        if do == "hang":
            time.sleep(3600)
        if do == "hold":
            while (directory / "gate").exists():
                time.sleep(0.02)
        if do == "blank-lines":
            for _ in range(params.get("mib", 8)):
                os.write(1, b"\n" * (1 << 20))
        if do == "garbage":
            os.write(1, b"progress: 50%\n{not json\n[1, 2]\n")
        if do == "wrong-id":
            os.write(1, json.dumps({"id": "nobody", "outcome": "passed"}).encode() + b"\n")
            continue
        if do == "invalid":
            os.write(1, json.dumps({"id": request["id"], "outcome": "maybe"}).encode() + b"\n")
            continue
        if do == "fail":
            answer(request, "failed", reason=f"wrong answer on {request['case']}")
            continue
        answer(request, "passed", score=1.0, usage={"input_tokens": 3})
        if do == "exit-after":
            return 0
    (directory / f"eof-{pid}").write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
