"""The fake agent: a tiny real job for the tests, stdlib only and quick to start.

Run as ``python -S fake_agent.py ACTION...`` (see ``fake_agent_command`` in
``tests/helpers/fake_jobs.py``). Its behaviour is a list of *actions*, taken from
``$FAKE_AGENT_ACTIONS`` (a JSON list, see ``fake_agent_env``) and then from its argv, run in
order; it exits 0 when they run out. It imports only what starting needs (a test suite
starts it hundreds of times): ``json`` and ``subprocess`` wait for the actions that use them.

An argv element that is not an action (``{case}``, ``--out``...) is ignored, so a sweep's
command may pass the fake agent anything. Actions:

==================  ===============================================================
``print=TEXT``      print TEXT (flushed at once)
``sleep=S``         sleep S seconds
``exit=N``          exit with status N now (``pass`` = ``exit=0``, ``fail`` = ``exit=1``)
``kill=SIG``        kill itself with signal SIG (number or name, e.g. ``KILL``)
``ignore-term``     ignore SIGTERM from now on
``result=TEXT``     write TEXT, as is, to ``$BATCH_RUN_DIR/result.json``
``record``          write argv, cwd and ``BATCH_*``/``FAKE_*`` env to
                    ``$BATCH_RUN_DIR/agent-seen.json``
``pidfile=PATH``    write its pid to PATH
``grandchild=PATH`` start a grandchild (same process group) that ignores SIGTERM and
                    sleeps 60 s; write the grandchild's pid to PATH
``touch=PATH``      create PATH
``count=PATH``      append ``case<TAB>model<TAB>attempt`` to PATH (counts runs)
``flaky=PATH``      exit 2 if PATH does not exist yet (creating it), else go on: a job
                    that fails once with a non-model error, then behaves
``hold=PATH``       wait while PATH exists (at most 60 s): a gate the test opens by
                    deleting PATH
``stamp=PATH``      append ``time<TAB>case<TAB>model<TAB>attempt`` to PATH (``time.time()``;
                    twice around a sleep, it shows when the job really ran)
==================  ===============================================================
"""

from __future__ import annotations

import os
import signal
import sys
import time

_GRANDCHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def _write(path: str, text: str, mode: str = "w") -> None:
    with open(path, mode, encoding="utf-8") as handle:
        handle.write(text)


def _run_dir() -> str:
    return os.environ.get("BATCH_RUN_DIR", ".")


def _act(name: str, value: str) -> None:
    if name == "print":
        print(value, flush=True)
    elif name == "sleep":
        time.sleep(float(value))
    elif name in ("exit", "pass", "fail"):
        sys.exit(int(value) if name == "exit" else int(name == "fail"))
    elif name == "kill":
        sig = int(value) if value.isdigit() else getattr(signal, f"SIG{value.upper()}")
        os.kill(os.getpid(), sig)
        time.sleep(5)
    elif name == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif name == "result":
        _write(os.path.join(_run_dir(), "result.json"), value)
    elif name == "record":
        import json

        seen = {
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith(("BATCH_", "FAKE_"))},
        }
        _write(os.path.join(_run_dir(), "agent-seen.json"), json.dumps(seen))
    elif name == "pidfile":
        _write(value, str(os.getpid()))
    elif name == "grandchild":
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", _GRANDCHILD])
        _write(value, str(child.pid))
    elif name == "touch":
        _write(value, "", "a")
    elif name == "count":
        env = os.environ
        line = f"{env.get('BATCH_CASE')}\t{env.get('BATCH_MODEL')}\t{env.get('BATCH_ATTEMPT')}\n"
        _write(value, line, "a")
    elif name == "flaky" and not os.path.exists(value):
        _write(value, "")
        sys.exit(2)
    elif name == "hold":
        deadline = time.monotonic() + 60
        while os.path.exists(value) and time.monotonic() < deadline:
            time.sleep(0.01)
    elif name == "stamp":
        env = os.environ
        fields = (env.get("BATCH_CASE"), env.get("BATCH_MODEL"), env.get("BATCH_ATTEMPT"))
        _write(value, "\t".join([repr(time.time()), *map(str, fields)]) + "\n", "a")


ACTIONS = frozenset(
    {"print", "sleep", "exit", "pass", "fail", "kill", "ignore-term", "result", "record"}
    | {"pidfile", "grandchild", "touch", "count", "flaky", "hold", "stamp"}
)


def _actions(argv: list[str]) -> list[tuple[str, str]]:
    raw = argv
    if "FAKE_AGENT_ACTIONS" in os.environ:
        import json

        raw = json.loads(os.environ["FAKE_AGENT_ACTIONS"]) + argv
    parsed = []
    for item in raw:
        name, _, value = item.partition("=")
        if name in ACTIONS:
            parsed.append((name, value))
    return parsed


def main(argv: list[str]) -> None:
    for name, value in _actions(argv):
        _act(name, value)


if __name__ == "__main__":
    main(sys.argv[1:])
