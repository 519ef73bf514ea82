"""Builders for tiny real jobs, shared by every test that runs processes.

:func:`make_sweep` builds a sweep without a file; :class:`Batch` is a batch dir in which
tests run attempts through ``batch.attempt.runner`` and read back their record and log.

Two kinds of job:

* :func:`write_job_script` writes an executable Python script from a body of code.
* The fake agent, ``tests/helpers/fake_agent.py`` (its docstring lists its actions), a
  stdlib-only script run as ``python -S`` (~30 ms of CPU to start, not ~65: suites start
  it hundreds of times). :func:`fake_agent_command` gives its argv::

      fake_agent_command("print=429 rate limit", "exit=1")
      # -> [sys.executable, "-S", ".../tests/helpers/fake_agent.py", "print=429 rate limit",
      #     "exit=1"]
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batch.attempt.runner import AttemptResult
    from batch.plan.jobs import Job
    from batch.sweep.features.steps import Step
    from batch.sweep.load import ModelSpec, Sweep

#: The fake agent script (``python -S``: it needs no site-packages).
FAKE_AGENT = Path(__file__).resolve().with_name("fake_agent.py")


def fake_agent_command(*actions: str) -> list[str]:
    """argv that runs the fake agent with ``actions`` (sweep ``command`` or spawn argv)."""
    return [sys.executable, "-S", str(FAKE_AGENT), *actions]


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
    predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.01
) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes; returns its last value.

    The default is long: it only runs out when the test fails, and on a loaded machine (the
    suite runs in parallel processes on two cores) a job can take seconds to start."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def read_pid(path: Path, timeout: float = 30.0) -> int:
    """The pid a job wrote to ``path`` (waits for the file to appear)."""
    path = Path(path)
    if not wait_until(lambda: path.exists() and path.read_text().strip(), timeout):
        raise TimeoutError(f"{path} never appeared")
    return int(path.read_text())
