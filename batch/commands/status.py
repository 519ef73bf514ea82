"""``batch status BATCH_DIR``: what the summary says and what the ledger holds, side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from batch.errors import ExitStatus, UsageError
from batch.event_segments import all_lines
from batch.layout import LOGS_DIR
from batch.plan.batch_dir import is_sweep_file, newest_of_sweep, not_a_batch_dir
from batch.plan.jobs import STATUSES
from batch.printable import json_text, one_line
from batch.summary.read import read_summary, summary_categories
from batch.sweep.load import load_sweep
from run_support.results import NON_MODEL_FAILURE_CATEGORIES, Ledger, record_outcome


def batch_status(batch_dir: Path) -> dict[str, Any]:
    """A plain report of ``batch_dir``; writes nothing in it (the ledger's cache is the
    reader's own, outside the batch dir)."""
    try:
        summary: dict[str, Any] | None = read_summary(batch_dir)
        summary_error = None
    except FileNotFoundError:
        summary, summary_error = None, "no batch-summary.json"
    except (OSError, ValueError) as exc:
        summary, summary_error = None, f"unreadable batch-summary.json: {exc}"
    with Ledger(batch_dir) as ledger:
        recorded = ledger.load()
    categories = NON_MODEL_FAILURE_CATEGORIES if summary is None else summary_categories(summary)
    ledger_counts = dict.fromkeys(("passed", "failed", "error"), 0)
    not_passed = []
    for meta in recorded.values():
        outcome = record_outcome(meta, categories)
        ledger_counts[outcome.status] += 1
        if outcome.status != "passed":
            not_passed.append(
                {
                    "case": meta.test_case,
                    "model": meta.model,
                    **({"repeat": meta.repeat} if meta.repeat != 1 else {}),
                    "status": outcome.status,
                    "failure_category": outcome.category,
                    "reason": outcome.reason,
                    "run_dir": outcome.run_dir,
                }
            )
    not_passed.sort(key=lambda row: (row["model"], row["case"], row.get("repeat", 1)))
    totals = None
    if summary is not None:
        counted = summary.get("totals") or {}
        totals = {key: counted.get(key, 0) for key in STATUSES}
    return {
        "batch_dir": str(batch_dir),
        "state": None if summary is None else summary.get("state"),
        "summary_error": summary_error,
        "totals": totals,
        "recorded_pairs": len(recorded),
        # Additive: the highest repeat with a record (1 for a batch without repeats).
        "max_repeat": max((repeat for _, _, repeat in recorded), default=1),
        "recorded": ledger_counts,
        "not_passed": not_passed,
        "incomplete": sorted(recorded.incomplete),
        "unreadable": [{"path": p, "reason": why} for p, why in sorted(recorded.unreadable)],
        # Additive: each pool the batch shares with other sweeps, as it last saw it.
        "pools": last_pools(batch_dir),
    }


_POOL_EVENT = b'"event": "pool"'
_POOL_FIELDS = ("concurrency", "rate", "max_concurrent", "max_rate", "running", "refused", "sweeps")


def last_pools(batch_dir: Path) -> dict[str, dict[str, Any]]:
    """Pool name -> its limits, users and refusals in the batch's latest ``pool`` event."""
    pools: dict[str, dict[str, Any]] = {}
    for line in all_lines(batch_dir / LOGS_DIR):
        if _POOL_EVENT not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("pool"), str):
            pools[event["pool"]] = {"t": event.get("t")} | {
                field: event.get(field) for field in _POOL_FIELDS
            }
    return dict(sorted(pools.items()))


def _pool_line(name: str, pool: dict[str, Any]) -> str:
    def most(value: Any, maximum: Any, unit: str) -> str:
        if not isinstance(value, int | float):
            return f"no limit{unit and ' rate'}"
        text = f"{value:.3g}{unit}"
        return text if not isinstance(maximum, int | float) else f"{text} of {maximum:.3g}{unit}"

    sweeps = pool["sweeps"] if isinstance(pool["sweeps"], list) else []
    return (
        f"  {name}: {most(pool['concurrency'], pool['max_concurrent'], '')} at once, "
        f"{most(pool['rate'], pool['max_rate'], '/s')}; {pool['refused']} refused; "
        f"sweeps: {', '.join(map(str, sweeps))} (at {pool['t']})"
    )


#: Rows of a list the text shows; ``--format json`` lists all.
_LISTED = 20


def _why(row: dict[str, Any]) -> str:
    """One job that did not pass: case, model, status (category): reason."""
    what = (
        row["status"]
        if not row["failure_category"]
        else f"{row['status']} ({row['failure_category']})"
    )
    job = f"{row['case']} \N{MULTIPLICATION SIGN} {row['model']}"
    if "repeat" in row:  # as the live lines name a repeat past the first
        job += f" #{row['repeat']}"
    text = f"{job}: {what}"
    return f"{text}: {row['reason']}" if row["reason"] else text


def status_main(batch_dir: Path, *, fmt: str = "table", out: TextIO, err: TextIO) -> ExitStatus:
    """``batch status``: print what ``batch_dir`` holds; a sweep file: its newest batch dir
    (the one ``--resume`` would take)."""
    if is_sweep_file(batch_dir):
        sweep = load_sweep(batch_dir)
        batch_dir = newest_of_sweep(batch_dir, sweep.output, sweep.name)
    if not batch_dir.is_dir():
        why = "not a directory" if batch_dir.exists() else "no such batch dir"
        raise UsageError(f"{batch_dir}: {why}")
    problem = not_a_batch_dir(batch_dir)
    if problem:
        raise UsageError(problem)
    report = batch_status(batch_dir)
    if fmt == "json":
        out.write(json_text(report) + "\n")
        return ExitStatus.OK
    lines = [f"batch dir: {report['batch_dir']}"]
    if report["totals"] is None:
        lines.append(f"summary:   {report['summary_error']}")
    else:
        counts = ", ".join(f"{k} {v}" for k, v in report["totals"].items())
        lines.append(f"summary:   {report['state']} — {counts}")
    recorded = ", ".join(f"{k} {v}" for k, v in report["recorded"].items())
    what = "(case, model, repeat) triples" if report["max_repeat"] > 1 else "(case, model) pairs"
    lines.append(f"ledger:    {report['recorded_pairs']} {what} recorded — {recorded}")
    not_passed = report["not_passed"]
    if not_passed:
        lines.append(f"not passed ({len(not_passed)}), and why:")
        lines += [f"  {_why(row)}" for row in not_passed[:_LISTED]]
        if len(not_passed) > _LISTED:
            lines.append(f"  … and {len(not_passed) - _LISTED} more (--format json lists all)")
    lines.append(
        f"incomplete run dirs (running, or killed before recording): {len(report['incomplete'])}"
    )
    lines += [f"  {path}" for path in report["incomplete"][:_LISTED]]
    if len(report["incomplete"]) > _LISTED:
        more = len(report["incomplete"]) - _LISTED
        lines.append(f"  … and {more} more (--format json lists all)")
    lines.append(
        f"unreadable records (their jobs run again on --resume): {len(report['unreadable'])}"
    )
    lines += [f"  {item['path']}: {item['reason']}" for item in report["unreadable"]]
    if report["pools"]:
        lines.append("pools (shared with other sweeps; as this batch last saw them):")
        lines += [_pool_line(name, pool) for name, pool in report["pools"].items()]
    # Paths, reasons and the summary's values are not the driver's text: one line each.
    out.write("".join(one_line(line) + "\n" for line in lines))
    return ExitStatus.OK
