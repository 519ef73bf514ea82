"""Builders for tiny real jobs, shared by every test that runs processes.

:func:`make_sweep` builds a sweep without a file; :class:`Batch` is a batch dir in which
tests run attempts through ``batch.attempt.runner`` and read back their record and log.

Two kinds of job:

* :func:`write_job_script` writes an executable Python script from a body of code.
* The fake agent is this very file run as a script (stdlib only, starts in ~50 ms). Its
  behaviour is a list of *actions*, taken from ``$FAKE_AGENT_ACTIONS`` (a JSON list, see
  :func:`fake_agent_env`) and then from its argv, run in order; it exits 0 when they run
  out::

      fake_agent_command("print=429 rate limit", "exit=1")
      # -> [sys.executable, ".../tests/fake_jobs.py", "print=429 rate limit", "exit=1"]

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

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batch.attempt.runner import AttemptResult
    from batch.plan.jobs import Job
    from batch.sweep.load import ModelSpec, Sweep
    from batch.sweep.step_specs import Step

FAKE_AGENT = Path(__file__).resolve()
_GRANDCHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def fake_agent_command(*actions: str) -> list[str]:
    """argv that runs the fake agent with ``actions`` (sweep ``command`` or spawn argv)."""
    return [sys.executable, str(FAKE_AGENT), *actions]


def fake_agent_env(*actions: str) -> dict[str, str]:
    """Environment that makes the fake agent run ``actions`` before its argv ones.

    For actions with braces (``result={...}``): a sweep command is a template, where a
    brace would be a placeholder.
    """
    return {"FAKE_AGENT_ACTIONS": json.dumps(actions)}


def stubborn(*actions: str) -> tuple[str, ...]:
    """A job that ignores SIGTERM before it does ``actions`` (so a pid file means it ignores)."""
    return ("ignore-term", *actions, "sleep=30")


def make_sweep(
    directory: Path,
    command: Sequence[str],
    *,
    cases: Sequence[str] = ("c01",),
    models: Sequence[str | ModelSpec] = ("mock/oracle",),
    **fields: Any,
) -> Sweep:
    """A sweep as if loaded from ``directory/sweep.yaml`` (which is not written)."""
    # Imported here: run as the fake agent, this file must start with the stdlib alone.
    from batch.sweep.load import CaseSpec, ModelSpec, Sweep

    return Sweep(
        path=Path(directory) / "sweep.yaml",
        cases=tuple(CaseSpec(id=case) for case in cases),
        models=tuple(m if isinstance(m, ModelSpec) else ModelSpec(id=m) for m in models),
        command=tuple(command),
        output=Path(directory) / "runs",
        **fields,
    )


class Batch:
    """A batch dir under ``root`` and the means to run attempts in it (``batch.attempt.runner``)."""

    def __init__(self, root: Path) -> None:
        from batch.attempt.runner import BatchContext
        from batch.processes.registry import ProcessRegistry

        self.root = Path(root)
        self.dir = self.root / "runs" / "batch-20261130T031500Z"
        (self.dir / "batch-logs").mkdir(parents=True)
        self.registry = ProcessRegistry(self.dir, watchdog=False)
        self.ctx = BatchContext(self.dir, self.dir.name, self.registry)

    def sweep(self, *actions: str, **fields: Any) -> Sweep:
        """A sweep whose command runs the fake agent with ``actions``."""
        return make_sweep(self.root, fake_agent_command(*actions), **fields)

    def run_steps(self, *steps: Step, job: Job | None = None, **fields: Any) -> AttemptResult:
        """Run one attempt of a sweep of ``steps`` (instead of a command)."""
        return self.run(make_sweep(self.root, (), steps=steps, **fields), job)

    def run(
        self, sweep: Sweep, job: Job | None = None, attempt: int = 1, **kw: Any
    ) -> AttemptResult:
        """Run one attempt of ``job`` (default ``c01`` on ``mock/oracle``) to its record."""
        import asyncio

        from batch.attempt.runner import run_attempt
        from batch.plan.jobs import Job

        job = job or Job("c01", "mock/oracle")
        return asyncio.run(run_attempt(job, sweep, self.ctx, attempt, **kw))

    def record(self, result: AttemptResult) -> dict[str, Any]:
        return json.loads((self.dir / result.run_dir / "run-meta.json").read_text())

    def log(self, result: AttemptResult) -> str:
        return (self.dir / result.run_dir / "output.log").read_text()


def write_job_script(directory: Path, body: str, *, name: str = "job.py") -> Path:
    """Write ``body`` (dedented Python) as an executable script ``directory/name``."""
    path = Path(directory) / name
    path.write_text(f"#!{sys.executable}\n{textwrap.dedent(body)}", encoding="utf-8")
    path.chmod(0o755)
    return path


def is_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (exited, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return True
    return stat.rpartition(b")")[2].split()[0] in (b"Z", b"X")


def wait_until(
    predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.01
) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def read_pid(path: Path, timeout: float = 5.0) -> int:
    """The pid a job wrote to ``path`` (waits for the file to appear)."""
    path = Path(path)
    if not wait_until(lambda: path.exists() and path.read_text().strip(), timeout):
        raise TimeoutError(f"{path} never appeared")
    return int(path.read_text())


# --- the fake agent itself ----------------------------------------------------------------


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
        seen = {
            "argv": sys.argv[1:],
            "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith(("BATCH_", "FAKE_"))},
        }
        _write(os.path.join(_run_dir(), "agent-seen.json"), json.dumps(seen))
    elif name == "pidfile":
        _write(value, str(os.getpid()))
    elif name == "grandchild":
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
    raw = json.loads(os.environ.get("FAKE_AGENT_ACTIONS", "[]")) + argv
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
