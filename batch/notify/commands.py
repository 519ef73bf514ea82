"""Notifications: the sweep's ``notify`` commands, run on batch events (docs/notify.md).

A notify command is an argv list run without a shell, once per event it listens to
(``end``, ``halt``, ``interrupt``, ``stall``, ``recovered``), with the event as one JSON
object on stdin and ``BATCH_*`` variables (:data:`ENV_VARS`) added to the environment it is
given. Everything batch puts into the event and those variables passes through the
caller's redactor first; the inherited environment is passed as it is (a notifier may need
its own token from it).

A notifier is a guest of the sweep: one that fails, cannot start or hangs past its
``timeout`` is written to the notify log (its output captured and redacted) and, when it
hangs, its process group is killed; none of it ever raises into the driver.
:class:`Notifier` runs each event as a background task (fire and forget) and
:meth:`Notifier.drain` lets the driver wait, bounded, for the last ones (the ``end``
event) before it exits.

The sweep key and :class:`NotifySpec` are in ``batch.sweep.features.notify``; what a command is
given (the payload and the ``BATCH_*`` variables) in ``batch.notify.payload``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from batch.durations import format_duration
from batch.notify.payload import notify_env, payload_bytes
from batch.processes.watchdog import TOKEN_VAR, signal_group
from batch.sweep.features.notify import NotifySpec
from batch.sweep.secrets import Redactor, read_end
from run_support.results import utc_stamp
from run_support.safe_files import append_text

if TYPE_CHECKING:
    from batch.processes.registry import ProcessRegistry

__all__ = [
    "KILL_GRACE",
    "Notifier",
    "NotifyResult",
    "notify",
    "run_notify_command",
]

#: After the timeout: SIGTERM to the group, this long to exit, then SIGKILL. Short, because
#: a notifier holds nothing worth saving and the driver may be waiting to exit.
KILL_GRACE = 1.0
#: The most output of one run kept for the log (its tail).
OUTPUT_LIMIT = 16 * 1024


@attrs.frozen
class NotifyResult:
    """How one notify command ran: ``ok`` only when it exited 0 within its time limit."""

    argv: tuple[str, ...]
    event: str
    ok: bool
    #: The exit status; negative: killed by that signal; None: it never started or hung.
    exit_code: int | None
    reason: str
    seconds: float


# --- running one command ---------------------------------------------------------------------


async def run_notify_command(
    argv: Sequence[str],
    *,
    event: str,
    stdin: bytes,
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    redact: Redactor,
    timeout: float,
    grace: float = KILL_GRACE,
    registry: ProcessRegistry | None = None,
) -> NotifyResult:
    """Run one notify command to its end or its time limit; never raises (but cancellation).

    Its output is captured (the last :data:`OUTPUT_LIMIT` bytes), redacted and appended to
    ``log_path`` with the outcome. A command still running after ``timeout`` has its
    process group sent SIGTERM and, ``grace`` later, SIGKILL. Cancelling kills the group
    at once: whoever cancels is out of time. Anything the command leaves running in its
    group is killed when it exits.

    With ``registry`` the group is tracked as a job's is (``pgids.json``, the watchdog, a
    second Ctrl-C) and the command carries a job token: a driver that dies
    mid-notification leaves no notifier behind, nor anything it started.

    Stdin and output are temporary files, not pipes: a command that ignores its stdin, or
    leaves a process holding its output open, can neither block nor hold up the driver.
    """
    started = time.monotonic()

    def result(ok: bool, exit_code: int | None, reason: str, output: str = "") -> NotifyResult:
        done = NotifyResult(tuple(argv), event, ok, exit_code, reason, time.monotonic() - started)
        _log(log_path, done, output, redact)
        return done

    if not argv:
        return result(False, None, "the command is empty")
    # A job token (not a helper's): what a notifier leaves running, even outside its
    # group, is swept like a finished job's escapee, and the watchdog stops it with the jobs.
    token = None if registry is None else registry.mint(guest=True)
    if token is not None:
        env = {**env, TOKEN_VAR: token}
    with contextlib.ExitStack() as files:
        try:
            given = files.enter_context(tempfile.TemporaryFile())
            output = files.enter_context(tempfile.TemporaryFile())
            given.write(stdin)
            given.seek(0)
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=dict(env),
                stdin=given,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            if registry is not None and token is not None:
                registry.release(token)
            return result(False, None, f"cannot start {argv[0]!r}: {exc}")
        pgid = 0
        if registry is not None:
            pgid = registry.add(process, case=f"notify {event}", model="", token=token)
        try:
            async with asyncio.timeout(timeout):
                code = await process.wait()
        except TimeoutError:
            await _stop_group(process, grace)
            reason = f"timed out after {format_duration(timeout)}; killed"
            return result(False, None, reason, _tail(output, redact))
        except asyncio.CancelledError:
            signal_group(process.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):  # reaped, so its exit is not left pending
                    await process.wait()
            result(False, None, "killed: the driver could not wait longer", _tail(output, redact))
            raise
        finally:
            signal_group(process.pid, signal.SIGKILL)  # what it left behind in its group
            if registry is not None:
                registry.discard(pgid)
        if code < 0:
            return result(False, code, f"killed by signal {-code}", _tail(output, redact))
        return result(code == 0, code, f"exit code {code}", _tail(output, redact))


def _tail(output: IO[bytes], redact: Redactor) -> str:
    """The last :data:`OUTPUT_LIMIT` bytes written (a chatty notifier must not fill the
    log), redacted with what comes before the cut: a secret it falls in is hidden whole."""
    try:
        return read_end(output, OUTPUT_LIMIT, redact)[0]
    except OSError:
        return ""


async def _stop_group(process: asyncio.subprocess.Process, grace: float) -> None:
    signal_group(process.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(grace):
            await process.wait()
    signal_group(process.pid, signal.SIGKILL)
    await process.wait()


def _log(path: Path, result: NotifyResult, printed: str, redact: Redactor) -> None:
    """Append one run to the notify log; a log that cannot be written is not the sweep's end.

    ``printed``: the end of its output, already redacted (:func:`_tail`).
    """
    outcome = "ok" if result.ok else "FAILED"
    lines = [
        redact(f"--- {utc_stamp()} notify {result.event}: {shlex.join(result.argv)}"),
        *printed.splitlines(),
        redact(f"--- {outcome}: {result.reason} ({format_duration(result.seconds)})"),
    ]
    text = "\n".join(lines) + "\n"
    with contextlib.suppress(OSError):
        # batch-logs/ checked at each write: a job may have swapped it for a symlink.
        append_text(path, text, real_dirs=1)


# --- every command for one event, and the background runner ----------------------------------


async def notify(
    spec: NotifySpec,
    payload: Mapping[str, Any],
    *,
    base_env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    redact: Redactor,
    grace: float = KILL_GRACE,
    registry: ProcessRegistry | None = None,
) -> list[NotifyResult]:
    """Run every command of ``spec`` for ``payload``'s event, side by side; [] when the
    spec does not listen to it."""
    event = payload["event"]
    if event not in spec.events:
        return []
    stdin = payload_bytes(payload, redact)
    env = notify_env(payload, base_env, redact)
    runs = (
        run_notify_command(
            argv,
            event=event,
            stdin=stdin,
            env=env,
            cwd=cwd,
            log_path=log_path,
            redact=redact,
            timeout=spec.timeout,
            grace=grace,
            registry=registry,
        )
        for argv in spec.commands
    )
    return list(await asyncio.gather(*runs))


class Notifier:
    """The driver's handle: ``fire`` an event in the background, ``drain`` before exiting.

    ``on_result`` is told every command's result (the driver shows a failure and writes it
    to ``events.jsonl``); an exception from it is not the sweep's problem either.
    """

    def __init__(
        self,
        spec: NotifySpec,
        *,
        base_env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        redact: Redactor,
        on_result: Callable[[NotifyResult], None] = lambda result: None,
        grace: float = KILL_GRACE,
        registry: ProcessRegistry | None = None,
    ) -> None:
        self.spec = spec
        self._base_env = base_env
        self._cwd = cwd
        self._log_path = log_path
        self._redact = redact
        self._grace = grace
        self._registry = registry
        self._on_result = on_result
        #: Held: the event loop keeps only a weak reference to a task.
        self._tasks: set[asyncio.Task[None]] = set()
        #: The event fired last: the next one's commands start once its have ended.
        self._last: asyncio.Task[None] | None = None

    def fire(self, payload: Mapping[str, Any]) -> None:
        """Start the event's commands in the background and return at once."""
        if payload["event"] not in self.spec.events:
            return
        task = asyncio.get_running_loop().create_task(self._deliver(payload, self._last))
        self._last = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, payload: Mapping[str, Any], after: asyncio.Task[None] | None) -> None:
        if after is not None:
            # In the order they happened: a receiver must not see ``end`` before the
            # ``halt`` that caused it. A hung command delays the next event by its timeout.
            await asyncio.wait([after])
        results = await notify(
            self.spec,
            payload,
            base_env=self._base_env,
            cwd=self._cwd,
            log_path=self._log_path,
            redact=self._redact,
            grace=self._grace,
            registry=self._registry,
        )
        for result in results:
            with contextlib.suppress(Exception):
                self._on_result(result)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def longest_wait(self) -> float:
        """How long the events fired and not yet delivered may still take: each waits for
        the one before it, and each one's commands may run to the timeout and the kill
        grace (and half a second to be reaped)."""
        return len(self._tasks) * (self.spec.timeout + self._grace + 0.5)

    async def drain(self, bound: float | None = None) -> bool:
        """Wait for every fired event, at most ``bound`` seconds (default: the
        :meth:`longest_wait`, so a hung notifier of an earlier event cannot cut the ``end``
        event's commands short), then kill what is left (logged as such). True when
        everything ended within the bound. The driver calls it last, so its exit waits at
        most ``bound``."""
        if bound is None:
            bound = self.longest_wait()
        tasks = list(self._tasks)
        if not tasks:
            return True
        _done, left = await asyncio.wait(tasks, timeout=bound)
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left)
        return not left
