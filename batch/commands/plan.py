"""``batch plan`` (and ``batch run --dry-run``): every job's decision and its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from batch.errors import ExitStatus
from batch.plan.planner import Plan, RunOptions, make_plan
from batch.printable import one_line, write_json
from run_support.ledger_scan import gc_paused


def plan_document(plan: Plan) -> dict[str, Any]:
    counts = {"run": 0, "carry": 0, "retry": 0}
    for job in plan.jobs:
        counts[job.decision] += 1
    return {
        "batch_dir": None if plan.batch_dir is None else str(plan.batch_dir),
        "counts": counts,
        "jobs": [
            {"case": j.case, "model": j.model, "decision": j.decision, "reason": j.decision_reason}
            for j in plan.jobs
        ],
        "unreadable": [{"path": path, "reason": why} for path, why in plan.unreadable],
        "changes": list(plan.changes),
    }


@gc_paused()  # the plan and its output: many small acyclic objects (batch.plan.planner)
def plan_main(
    sweep: Path, options: RunOptions, *, fmt: str = "table", out: TextIO, err: TextIO
) -> ExitStatus:
    """``batch plan``: print every job's decision; raises a :class:`~batch.errors.UsageError`
    for a bad sweep or selection."""
    plan = make_plan(sweep, options, read_only=True)
    document = plan_document(plan)
    if fmt == "json":
        write_json(document, out, rows="jobs")
        out.write("\n")  # not added to the text: a copy of 100,000 jobs' JSON
        return ExitStatus.OK
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Piped or redirected, a row stays one whole line (for grep and less): the table is as
    # wide as its content. A terminal narrower than that folds long run dirs, never cuts them.
    width = None if out.isatty() else 100_000
    if plan.changes:
        out.write("the sweep changed since this batch last ran:\n")
        out.writelines(f"  {line}\n" for line in plan.changes)
    console = Console(file=out, highlight=False, soft_wrap=False, width=width)
    table = Table("case", "model", "decision", title="batch plan")
    table.add_column("reason", overflow="fold")
    styles = {"run": "bold", "carry": "dim", "retry": "yellow"}
    for job in plan.jobs:
        # Text, not markup; one_line: a name or reason cannot start a row of its own.
        texts = (job.case, job.model, job.decision, job.decision_reason)
        cells = (Text(one_line(cell)) for cell in texts)
        table.add_row(*cells, style=styles[job.decision])
    console.print(table)
    counts = document["counts"]
    where = plan.batch_dir or f"a new batch dir under {plan.sweep.output}"
    out.write(
        one_line(
            f"{counts['run']} to run, {counts['retry']} to retry, {counts['carry']} carried — "
            f"{where}"
        )
        + "\n"
    )
    for path, why in plan.unreadable:
        out.write(one_line(f"unreadable record {path}: {why} (its job runs again)") + "\n")
    return ExitStatus.OK
