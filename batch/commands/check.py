"""``batch check SWEEP``: a preflight of the model-switch chain, without running the sweep.

For each distinct model, in sweep order: the ``between_models`` reset, the RAM settle, then
the ``probe`` command (e.g. a one-token request), as the overnight queue would do before
the model's block (the cooldown is left out: nothing runs after). Each model gets a row:
loaded yes/no (the probe's exit status), status, used RAM before the probe (the settled
baseline) and after it, and the difference. The rows are printed as a table and written to
``<output>/checks/<sweep name or batch>-<stamp>/`` as ``check.json`` (schema 1) and
``check.md``; the reset and probe output goes to ``batch-logs/between-models.log`` there.
With the sweep's ``containers`` key the container engine is tried too (its version, and a
labelled test container started and removed: ``batch.processes.containers.engine_check``),
one line below the table and ``containers`` in ``check.json``. With pools (``pools``,
``pool``) the pools' store is opened (one that cannot be reached: one line, exit 2, before
any write) and each pool gets a line: its declaration, its models, and what the store
holds now (its limits, the sweeps using it, its refusals, and what would hold with this
sweep's declaration); ``pools`` in ``check.json``.
Exit status: 0 every model loaded (or no probe is configured) and the engine check, if
any, passed, 1 a reset, probe or engine check failed, 2 a usage or sweep file error (an
engine not on PATH), 130 interrupted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from batch.errors import ExitStatus, RecordWriteError, UsageError
from batch.execution.model_switch import CommandResult, QueueRuntime, between_models_for
from batch.execution.settle import SettleResult, used_ram_mb
from batch.layout import (
    BETWEEN_MODELS_LOG,
    CHECK_REPORT,
    CHECK_TABLE,
    CHECKS_DIR,
    LOGS_DIR,
    container_label,
)
from batch.plan import batch_dir
from batch.plan.matrix import matches
from batch.printable import one_line
from batch.sweep.features.between_models import BetweenModels
from batch.sweep.load import Sweep, load_sweep
from batch.sweep.secrets import redact_text, redact_value, secret_values
from run_support import jsonio
from run_support.atomic import atomic_write_bytes
from run_support.results import utc_stamp

CHECK_SCHEMA = 1


@attrs.frozen
class CheckRow:
    model: str
    reset: CommandResult | None
    settle: SettleResult | None
    probe: CommandResult | None
    ram_before_mb: float
    ram_after_mb: float

    @property
    def loaded(self) -> bool | None:
        """Whether the probe saw the model answer; None when there is no probe."""
        return None if self.probe is None else self.probe.ok

    @property
    def delta_mb(self) -> float:
        return self.ram_after_mb - self.ram_before_mb

    @property
    def ok(self) -> bool:
        return self.loaded is not False and (self.reset is None or self.reset.ok)

    @property
    def status(self) -> str:
        parts = []
        if self.reset is not None and not self.reset.ok:
            parts.append(f"reset failed ({self.reset.reason})")
        if self.probe is None:
            parts.append("no probe configured")
        elif not self.probe.ok:
            parts.append(f"probe failed ({self.probe.reason})")
        if self.settle is not None and not self.settle.settled:
            parts.append("RAM did not settle (dirty baseline)")
        return "; ".join(parts) or "ok"


async def check_models(sweep: Sweep, model_ids: Sequence[str], rt: QueueRuntime) -> list[CheckRow]:
    """Reset, settle and probe each model in turn; one row per model."""
    rows = []
    for model_id in model_ids:
        if rt.stopping():
            break
        config = between_models_for(sweep, model_id) or BetweenModels()
        reset = settle = probe = None
        if config.reset is not None:
            reset = await rt.run(config.reset, model_id, "reset")
        if config.settle is not None:
            settle = await rt.settle(config.settle)
            before = settle.baseline_mb
        else:
            before = rt.ram_poll()
        command = sweep.model(model_id).probe or sweep.probe
        if command is not None:
            probe = await rt.run(command, model_id, "probe")
        rows.append(CheckRow(model_id, reset, settle, probe, before, rt.ram_poll()))
    return rows


# --- output ----------------------------------------------------------------------------------


def _command(result: CommandResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "ok": result.ok,
        "exit_code": result.exit_code,
        "reason": result.reason,
        "duration_seconds": round(result.duration_seconds, 3),
        "output_tail": list(result.output_tail),
    }


def failure_lines(rows: Sequence[CheckRow], log_path: Path) -> str:
    """For each failed reset or probe: why, in the command's own last words, and where the
    rest of its output is."""
    lines = []
    for row in rows:
        for what, result in (("reset", row.reset), ("probe", row.probe)):
            if result is None or result.ok:
                continue
            said = f": {' / '.join(result.output_tail)}" if result.output_tail else ""
            lines.append(one_line(f"{row.model}: {what} failed ({result.reason}){said}"))
    if lines:
        lines.append(one_line(f"  their whole output: {log_path}"))
    return "".join(line + "\n" for line in lines)


def check_document(sweep: Sweep, rows: Sequence[CheckRow], checked_at: str) -> dict[str, Any]:
    """``check.json``: schema 1; adding keys is fine, renaming one needs a new schema."""
    return {
        "schema": CHECK_SCHEMA,
        "sweep": str(sweep.path),
        "checked_at": checked_at,
        "models": [
            {
                "model": row.model,
                "loaded": row.loaded,
                "ok": row.ok,
                "status": row.status,
                "ram_before_mb": round(row.ram_before_mb, 1),
                "ram_after_mb": round(row.ram_after_mb, 1),
                "delta_mb": round(row.delta_mb, 1),
                "reset": _command(row.reset),
                "settle": None
                if row.settle is None
                else {
                    "settled": row.settle.settled,
                    "waited_seconds": round(row.settle.waited, 3),
                    "polls": len(row.settle.readings_mb),
                },
                "probe": _command(row.probe),
            }
            for row in rows
        ],
    }


def check_markdown(rows: Sequence[CheckRow]) -> str:
    """The rows as a Markdown table (what ``check.md`` holds and the command prints)."""
    lines = [
        "| model | loaded | status | RAM before (MB) | RAM after (MB) | Δ (MB) |",
        "|---|---|---|---:|---:|---:|",
    ]
    loaded = {True: "yes", False: "no", None: "-"}
    for row in rows:
        cells = [
            _cell(row.model),
            loaded[row.loaded],
            _cell(row.status),
            f"{row.ram_before_mb:.0f}",
            f"{row.ram_after_mb:.0f}",
            _signed_mb(row.delta_mb),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    # A probe's reason quotes the model's output: it may hold a line break or ESC.
    return one_line(text).replace("|", "\\|")


def check_main(
    sweep_path: Path,
    *,
    output: Path | None = None,
    model_globs: Sequence[str] = (),
    out: TextIO,
    err: TextIO,
    ram_poll: Callable[[], float] = used_ram_mb,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ExitStatus:
    """``batch check SWEEP``; returns the exit status (see the module docstring), or raises
    a :class:`~batch.errors.BatchError`."""
    sweep = load_sweep(sweep_path)
    if output is not None:
        sweep = attrs.evolve(sweep, output=output)
    model_ids = [m.id for m in sweep.models if matches(m.id, model_globs)]
    if not model_ids:
        raise UsageError("no model matches --models")
    problem = batch_dir.output_root_problem(sweep.output)
    if problem:
        raise UsageError(problem)
    if sweep.containers is not None:
        from batch.processes.containers import check_engine

        check_engine(sweep.containers, sweep_path)  # or one line, exit 2, before any write
    pools = pools_check(sweep)  # or one line, exit 2, before any write
    secrets = secret_values(sweep.env, *(model.env for model in sweep.models))
    try:
        check_dir = batch_dir.create_batch_dir(sweep.output / CHECKS_DIR, sweep.name)
    except OSError as exc:
        raise RecordWriteError(exc.filename or sweep.output, exc) from exc
    rt = QueueRuntime(
        sweep,
        check_dir / LOGS_DIR / BETWEEN_MODELS_LOG,
        ram_poll=ram_poll,
        sleep=sleep,
        clock=clock,
    )
    checked_at = utc_stamp()
    rows = asyncio.run(check_models(sweep, model_ids, rt))  # Ctrl-C: the CLI's 130
    engine = None if sweep.containers is None else _check_engine(sweep, check_dir)
    table = redact_text(check_markdown(rows), secrets)
    document = check_document(sweep, rows, checked_at)
    if engine is not None:
        document["containers"] = engine
    if pools:
        document["pools"] = pools
    document = redact_value(document, secrets)
    atomic_write_bytes(check_dir / CHECK_REPORT, jsonio.dumps(document, indent=True))
    atomic_write_bytes(check_dir / CHECK_TABLE, table.encode())
    out.write(table)
    out.write(redact_text(failure_lines(rows, rt.log_path), secrets))
    if engine is not None:
        out.write(redact_text(one_line(engine_line(engine)), secrets) + "\n")
    for name, pool in pools.items():
        out.write(redact_text(one_line(pool_check_line(name, pool)), secrets) + "\n")
    out.write(f"Check written to {check_dir / CHECK_REPORT} and {CHECK_TABLE}\n")
    engine_ok = engine is None or engine["ok"]
    return ExitStatus.OK if engine_ok and all(row.ok for row in rows) else ExitStatus.ERRORS


def _check_engine(sweep: Sweep, check_dir: Path) -> dict[str, Any]:
    """The sweep's container engine tried (``batch.processes.containers.engine_check``),
    as ``check.json``'s ``containers`` object."""
    from batch.processes.containers import engine_check, engine_env, run_now

    assert sweep.containers is not None
    label = container_label(check_dir.name, "check")
    cwd = str(sweep.path.parent)
    found = run_now(engine_check(sweep.containers, label, cwd, engine_env(sweep.env)))
    return {
        "engine": sweep.containers.engine,
        "version": found.version,
        "test_container": found.container,
        "ok": found.ok,
        "detail": found.detail,
    }


def engine_line(engine: dict[str, Any]) -> str:
    """``containers: podman (podman version 4.3.1): test container ... started and removed``."""
    version = engine["version"] or "not usable"
    return f"containers: {engine['engine']} ({version}): {engine['detail']}"


def pools_check(sweep: Sweep) -> dict[str, dict[str, Any]]:
    """Each pool the sweep's models name: its declaration, its models, and the store's
    state of it now (None: no sweep uses it now); ``PoolStoreError`` if the store cannot be
    reached."""
    from batch.execution.pools import pool_fields
    from batch.pools.config import describe, strictest
    from batch.pools.connect import open_store
    from batch.pools.store import PoolStoreError

    used: dict[str, list[str]] = {}
    for model in sweep.models:
        pool = sweep.pool_of(model.id)
        if pool is not None:
            used.setdefault(pool, []).append(model.id)
    if not used:
        return {}
    try:
        store = open_store(sweep.pools_store)
    except PoolStoreError as exc:
        raise PoolStoreError(f"{sweep.path}: {exc}") from None
    try:
        states = store.pools()
    finally:
        store.close()
    found = {}
    for name, models in used.items():
        declared = sweep.pools[name]
        state = states.get(name)
        holds = (
            strictest([declared, *(m.declared for m in state.members.values())])
            if (state is not None)
            else declared
        )
        found[name] = {
            "declared": describe(declared),
            "models": models,
            "store": store.where,
            "now": None if state is None else pool_fields(name, state),
            "would_hold": describe(holds),
        }
    return found


def pool_check_line(name: str, pool: dict[str, Any]) -> str:
    """``pool key: max_concurrent 8, rate 6/s (models m1, m2); in use by ...``."""
    text = f"pool {name}: {pool['declared']} (models {', '.join(pool['models'])}); "
    now = pool["now"]
    if now is None:
        text += f"no sweep uses it now ({pool['store']})"
    else:
        sweeps = ", ".join(now["sweeps"])
        rate = "no rate" if now["rate"] is None else f"{now['rate']:.3g}/s"
        at_once = "no limit" if now["concurrency"] is None else now["concurrency"]
        text += (
            f"in use by {sweeps}: {at_once} at once, {rate}, {now['running']} running, "
            f"{now['refused']} refused ({pool['store']})"
        )
    if pool["would_hold"] != pool["declared"]:
        text += f"; with the sweeps using it, the strictest holds: {pool['would_hold']}"
    return text


def _signed_mb(delta: float) -> str:
    """A difference in whole MB with its sign; one that rounds to 0 is "0", not "-0"."""
    rounded = round(delta)
    return f"{rounded:+d}" if rounded else "0"
