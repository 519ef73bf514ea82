"""``batch plan`` (and ``batch run --dry-run``): every job's decision and its reason."""

from __future__ import annotations

import shutil
from itertools import chain
from pathlib import Path
from typing import Any, TextIO

from batch.errors import ExitStatus
from batch.execution.stop_when_runtime import StopRuntime, rule_json
from batch.plan.jobs import Job
from batch.plan.planner import Plan, RunOptions, make_plan
from batch.printable import one_line, write_json
from run_support.heap import built_then_frozen, thawed_after


def decision_counts(plan: Plan) -> dict[str, int]:
    """How many jobs of each decision (``decide_jobs`` counted them)."""
    return {"run": plan.to_run - plan.retried, "carry": plan.carried, "retry": plan.retried}


def plan_document(plan: Plan) -> dict[str, Any]:
    document: dict[str, Any] = {
        "batch_dir": None if plan.batch_dir is None else str(plan.batch_dir),
        "counts": decision_counts(plan),
        "jobs": [_job_entry(j) for j in plan.jobs],
        "unreadable": [{"path": path, "reason": why} for path, why in plan.unreadable],
        "changes": list(plan.changes),
    }
    stops = _stop_lines(plan)
    if stops:  # additive: a stop_when sweep's
        rule = plan.sweep.stop_when
        assert rule is not None
        document["stop_when"] = {
            **rule_json(rule),
            "seed": None if plan.seed_drawn else rule.seed,
            "lines": stops,
        }
    return document


def _stop_lines(plan: Plan) -> list[str]:
    """stop_when's seed and where each model stands (batch.execution.stop_when_runtime)."""
    if plan.sweep.stop_when is None:
        return []
    runtime = StopRuntime(
        plan.sweep, plan.jobs, plan.retried_records, emit=lambda *a, **k: None, message=print
    )
    return runtime.plan_lines(seed_drawn=plan.seed_drawn)


def _job_entry(job: Job) -> dict[str, Any]:
    entry: dict[str, Any] = {"case": job.case, "model": job.model}
    if job.repeat != 1:  # additive, as in the summary: absent means repeat 1
        entry["repeat"] = job.repeat
    entry.update(decision=job.decision, reason=job.decision_reason)
    return entry


_HEADERS = ("case", "model", "decision", "reason")
_HEADERS_REPEATS = ("case", "model", "repeat", "decision", "reason")
#: How a row of each decision is shown on a terminal.
_STYLES = {"run": "bold", "carry": "dim", "retry": "yellow"}


# The plan and its output: many small acyclic objects (batch.plan.planner). Frozen once
# built, then thawed into the oldest generation: the first collection after the pause would
# otherwise walk all of them, as the program's last act before it ends (bench/README.md,
# "plan_dataset.py").
@thawed_after()
@built_then_frozen()
def plan_main(
    sweep: Path,
    options: RunOptions,
    *,
    fmt: str = "table",
    out: TextIO,
    err: TextIO,
    keep: list[object] | None = None,
) -> ExitStatus:
    """``batch plan``: print every job's decision; raises a :class:`~batch.errors.UsageError`
    for a bad sweep or selection. ``keep`` gets the plan, for a caller that ends the process
    right after and need not free its jobs one by one."""
    plan = make_plan(sweep, options)
    if keep is not None:
        keep.append(plan)
    if fmt == "json":
        write_json(plan_document(plan), out, rows="jobs")
        out.write("\n")  # not added to the text: a copy of 100,000 jobs' JSON
        return ExitStatus.OK
    from batch.display.boxed import boxed_columns, terminal_paint

    if plan.changes:
        out.write("the sweep changed since this batch last ran:\n")
        out.writelines(f"  {line}\n" for line in plan.changes)
    # Piped or redirected, a row stays one whole line (for grep and less): the table is as
    # wide as its content. A terminal narrower than that folds long run dirs, never cuts them.
    width = shutil.get_terminal_size().columns if out.isatty() else None
    repeats = any(j.repeat != 1 for j in plan.jobs)
    headers = _HEADERS_REPEATS if repeats else _HEADERS
    # By column, not a tuple per row (bench/README.md, "plan_dataset.py").
    jobs = plan.jobs
    decisions: list[str] = [j.decision for j in jobs]
    columns: list[list[str]] = [[j.case for j in jobs], [j.model for j in jobs]]
    if repeats:
        columns.append([str(j.repeat) for j in jobs])
    columns += [decisions, [j.decision_reason for j in jobs]]
    # one_line: a name or reason cannot start a row of its own. Checked all at once first:
    # nearly every plan is printable as it is.
    if not all(map(str.isprintable, chain.from_iterable(columns))):
        columns = [list(map(one_line, column)) for column in columns]
    paint = terminal_paint(out, {**_STYLES, "title": "italic", "header": "bold"})
    styles = decisions if paint else None
    table = boxed_columns("batch plan", headers, columns, styles=styles, width=width, paint=paint)
    out.writelines(table)
    counts = decision_counts(plan)
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
    for line in _stop_lines(plan):
        out.write(one_line(line) + "\n")
    return ExitStatus.OK
