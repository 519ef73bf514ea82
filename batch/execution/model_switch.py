"""The overnight model queue: what happens between two models of a ``model-major`` sweep.

Before each model's block of jobs the ``between_models`` section runs (docs/queue.md):

1. ``reset`` — a command such as ``lms unload --all``; a failing, hanging or missing one is
   logged and the queue goes on;
2. ``settle`` — poll used RAM until it plateaus (``|Δ| < epsilon_mb`` for ``plateau_polls``
   polls in a row, ``poll_interval`` apart) or ``timeout`` passes, which is logged as a
   dirty baseline and the queue goes on (``batch.execution.settle``; ``Settle``, ``SettleResult``,
   ``used_ram_mb`` and ``wait_until_settled`` are re-exported here);
3. ``cooldown`` — a plain wait.

A model may override any of these (:func:`resolve_between_models`). ``probe`` is the command
``batch check`` uses to see a model load. The sweep keys are read by the converters here
(``between_models_key``, ``model_between_models_key``, ``side_command_key``, ``probe_key``).
RAM poll, sleep and clock are injected through :class:`QueueRuntime`, so tests never sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from batch.durations import format_duration
from batch.execution.settle import (
    SettleResult,
    used_ram_mb,
    wait_until_settled,
)
from batch.layout import safe_name
from batch.processes.spawn import SpawnError, spawn_tracked, terminate_group
from batch.sweep.features.between_models import (
    BetweenModels,
    Settle,
    SideCommand,
    resolve_between_models,
)
from batch.sweep.placeholders import expand_command
from batch.sweep.secrets import NO_SECRETS, Redactor, read_end, redactor, secret_values
from run_support.safe_files import append_text

if TYPE_CHECKING:
    from batch.plan.jobs import Job
    from batch.processes.registry import ProcessRegistry
    from batch.sweep.load import Sweep

#: What a reset or probe command's output may add to the log, at most, per run.
SIDE_LOG_BYTES = 1 << 20

__all__ = [
    "CommandResult",
    "QueueRuntime",
    "SettleResult",
    "SwitchReport",
    "before_block_hook",
    "between_models_for",
    "run_side_command",
    "side_env",
    "switch_model",
    "used_ram_mb",
    "uses_between_models",
    "wait_until_settled",
]


def between_models_for(sweep: Sweep, model_id: str) -> BetweenModels | None:
    return resolve_between_models(sweep.between_models, sweep.model(model_id).between_models)


def uses_between_models(sweep: Sweep) -> bool:
    return sweep.between_models is not None or any(m.between_models for m in sweep.models)


# --- reset and probe commands ----------------------------------------------------------------


@attrs.frozen
class CommandResult:
    ok: bool
    exit_code: int | None
    #: For humans: "exit code 0", "timed out after 2m00s", "cannot start 'lms': ...".
    reason: str
    duration_seconds: float
    argv: tuple[str, ...] = ()
    #: The last lines it printed (redacted), the likeliest to say why it failed.
    output_tail: tuple[str, ...] = ()


def side_env(sweep: Sweep, model_id: str) -> dict[str, str]:
    """A reset or probe command's environment: the driver's, the sweep's, the model's env."""
    env = dict(os.environ)
    env.update(sweep.env)
    env.update(sweep.model(model_id).env)
    env["BATCH_MODEL"] = model_id
    return env


async def run_side_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    timeout: float,
    grace: float,
    label: str,
    registry: ProcessRegistry | None = None,
    redact: Redactor = NO_SECRETS,
) -> CommandResult:
    """Run a reset or probe command to its end, its output appended to ``log_path``.

    Unlike a job's, this output is the driver's log and the command sees the sweep's env,
    so it is caught in an anonymous temp file and appended with ``redact`` applied.
    """
    started = time.monotonic()

    def result(ok: bool, exit_code: int | None, reason: str) -> CommandResult:
        return CommandResult(ok, exit_code, reason, time.monotonic() - started, tuple(argv))

    try:
        append_text(log_path, redact(f"--- batch: {label}: {shlex.join(argv)}\n"), real_dirs=1)
    except OSError as exc:  # the log cannot be written: report it, never stop the queue
        return result(False, None, f"cannot write {log_path}: {exc.strerror or exc}")
    with tempfile.TemporaryFile() as output:
        try:
            done = await _run_to_end(
                argv, cwd, env, output.fileno(), timeout, grace, label, registry, result
            )
        finally:
            printed = _tail(output, redact)
            with contextlib.suppress(OSError):
                append_text(log_path, printed, real_dirs=1)
    return attrs.evolve(done, output_tail=last_lines(printed))


def last_lines(text: str, count: int = 3) -> tuple[str, ...]:
    """The last ``count`` non-blank lines of ``text``, stripped."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return tuple(lines[-count:])


def _tail(output: IO[bytes], redact: Redactor) -> str:
    """What a side command printed (its last :data:`SIDE_LOG_BYTES`), as text, redacted
    with what comes before the cut: a secret the cut falls in is hidden whole."""
    text, left_out = read_end(output, SIDE_LOG_BYTES, redact)
    if left_out:
        text = f"[batch: {left_out} earlier bytes not kept]\n{text}"
    return text


async def _run_to_end(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    fd: int,
    timeout: float,
    grace: float,
    label: str,
    registry: ProcessRegistry | None,
    result: Callable[[bool, int | None, str], CommandResult],
) -> CommandResult:
    try:
        process = await spawn_tracked(
            argv,
            cwd=cwd,
            env=env,
            fd=fd,
            registry=registry,
            case=label,
            model=env.get("BATCH_MODEL", ""),
            helper=True,
        )
    except SpawnError as exc:
        return result(False, None, str(exc))
    pgid = process.pid  # its own session; spawn_tracked already tracks it
    try:
        async with asyncio.timeout(timeout):
            code = await process.wait()
    except TimeoutError:
        await terminate_group(process.pid, grace, leader=process)
        await process.wait()
        return result(False, None, f"timed out after {format_duration(timeout)}")
    except asyncio.CancelledError:
        await terminate_group(process.pid, grace, leader=process)
        raise
    finally:
        if registry is not None:
            registry.discard(pgid)
    if code < 0:
        return result(False, code, f"killed by signal {-code}")
    return result(code == 0, code, f"exit code {code}")


def _sweep_redactor(sweep: Sweep) -> Redactor:
    return redactor(secret_values(sweep.env, *(model.env for model in sweep.models)))


# --- one model switch ------------------------------------------------------------------------


@attrs.define
class QueueRuntime:
    """Everything between-models work touches outside itself; tests pass fakes."""

    sweep: Sweep
    log_path: Path
    registry: ProcessRegistry | None = None
    ram_poll: Callable[[], float] = used_ram_mb
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    stopping: Callable[[], bool] = lambda: False
    on_wait: Callable[[str | None], None] = lambda reason: None
    #: Hides the sweep's secrets in what reset and probe commands print.
    redact: Redactor = attrs.field(
        default=attrs.Factory(lambda self: _sweep_redactor(self.sweep), takes_self=True)
    )

    async def run(self, command: SideCommand, model_id: str, label: str) -> CommandResult:
        values = {"model": model_id, "model_safe": safe_name(model_id)}
        return await run_side_command(
            expand_command(command.argv, values, {}),
            cwd=self.sweep.path.parent,
            env=side_env(self.sweep, model_id),
            log_path=self.log_path,
            timeout=command.timeout,
            grace=self.sweep.kill_grace,
            label=f"{label} {model_id}",
            registry=self.registry,
            redact=self.redact,
        )

    async def settle(self, settle: Settle) -> SettleResult:
        return await wait_until_settled(
            self.ram_poll, self.sleep, self.clock, settle=settle, stopping=self.stopping
        )


@attrs.frozen
class SwitchReport:
    model: str
    reset: CommandResult | None
    settle: SettleResult | None
    cooldown: float

    def problems(self) -> list[str]:
        """Warnings for the user: the queue went on regardless."""
        found = []
        if self.reset is not None and not self.reset.ok:
            found.append(f"reset before {self.model} failed ({self.reset.reason}); continuing")
        if self.settle is not None and not self.settle.settled and not self.settle.interrupted:
            found.append(
                f"RAM did not settle before {self.model} within "
                f"{format_duration(self.settle.waited)}: dirty baseline "
                f"({self.settle.baseline_mb:.0f} MB used); continuing"
            )
        return found

    def event(self) -> dict[str, Any]:
        """Fields of the ``between_models`` event in ``events.jsonl``."""
        fields: dict[str, Any] = {"model": self.model, "cooldown_seconds": self.cooldown}
        if self.reset is not None:
            fields["reset"] = {"ok": self.reset.ok, "reason": self.reset.reason}
        if self.settle is not None:
            fields["settle"] = {
                "settled": self.settle.settled,
                "waited_seconds": round(self.settle.waited, 3),
                "baseline_mb": round(self.settle.baseline_mb, 1),
                "polls": len(self.settle.readings_mb),
            }
        return fields


async def switch_model(rt: QueueRuntime, model_id: str, config: BetweenModels) -> SwitchReport:
    """Reset, settle, cool down before ``model_id``'s block; never raises on their failure."""
    reset = settle = None
    if config.reset is not None and not rt.stopping():
        rt.on_wait(f"before {model_id}: reset")
        reset = await rt.run(config.reset, model_id, "reset")
    if config.settle is not None and not rt.stopping():
        rt.on_wait(f"before {model_id}: waiting for RAM to settle")
        settle = await rt.settle(config.settle)
    if config.cooldown > 0 and not rt.stopping():
        rt.on_wait(f"before {model_id}: cooldown {format_duration(config.cooldown)}")
        end = rt.clock() + config.cooldown
        # In steps of at most a second: Ctrl-C must not sit out a long cooldown.
        while not rt.stopping() and (left := end - rt.clock()) > 0:
            await rt.sleep(min(left, 1.0))
    rt.on_wait(None)
    return SwitchReport(model_id, reset, settle, config.cooldown)


def before_block_hook(
    rt: QueueRuntime,
    *,
    message: Callable[[str], None],
    emit: Callable[..., None],
) -> Callable[[Sequence[Job]], Awaitable[None]] | None:
    """The scheduler's ``before_block`` for a model-major sweep; None when nothing is set."""
    if not uses_between_models(rt.sweep):
        return None

    async def before_block(block: Sequence[Job]) -> None:
        model_id = block[0].model
        config = between_models_for(rt.sweep, model_id)
        if config is None:
            return
        report = await switch_model(rt, model_id, config)
        for problem in report.problems():
            message(f"warning: {problem}")
        emit("between_models", **report.event())

    return before_block
