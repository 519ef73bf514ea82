"""What ``batch view`` shows of one batch, folded from its summary and its events.

Pure: :meth:`BatchView.load_summary` takes the summary as read, :meth:`BatchView.apply`
one ``events.jsonl`` event at a time; :meth:`BatchView.overview` is the page's top part
(state, progress, ETA, the models, running jobs, latest failures, controls), small whatever
the batch's size; :meth:`BatchView.cells` the grid, past :data:`GRID_CELLS` cells only its
failures. Counts per model are kept as jobs change, so an update costs what it changes,
not what the batch holds. Every text comes from the batch and is shown as text by the
page, never as markup.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import Any

from batch.stats.intervals import clustered_proportion
from batch.view.jobs import (
    FINISHED,
    STATUSES,
    JobState,
    Key,
    cell,
    event_key,
    number,
    sort_nan,
    stamp,
    text,
)

#: The grid shows every cell up to this many jobs; past it, the failures and the models'
#: aggregates (docs/view.md).
GRID_CELLS = 3000
#: Latest failures kept for the page.
LATEST_FAILURES = 20
#: A running job is flagged once it has run this many times its model's median duration.
STUCK_FACTOR = 3.0
#: Durations kept per model for its median.
DURATIONS_KEPT = 2000
#: The statuses an adjusted pass rate judges.
_JUDGED = frozenset({"passed", "failed"})


class BatchView:
    """One batch as the page shows it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = "unknown"
        self.jobs: dict[Key, JobState] = {}
        self.models: dict[str, Counter[str]] = {}
        #: Per case x model, its samples that passed and that passed or failed; per model,
        #: how many of its case x models stand at each such pair: the clusters of its
        #: interval, kept as jobs change so a snapshot need not walk every job.
        self._clusters: dict[tuple[str, str], tuple[int, int]] = {}
        self._shapes: dict[str, Counter[tuple[int, int]]] = {}
        self.model_order: list[str] = []
        self.running: dict[Key, float] = {}
        #: The step a running multi-step job is on.
        self.steps: dict[Key, str] = {}
        self.durations: dict[str, deque[float]] = {}
        self.failures: deque[dict[str, Any]] = deque(maxlen=LATEST_FAILURES)
        self.breakers: dict[str, str] = {}
        self.limits: dict[str, dict[str, Any]] = {}
        #: Pool name -> its limits, users and refusals, from the latest ``pool`` event.
        self.pools: dict[str, dict[str, Any]] = {}
        self.spent_usd = 0.0
        self.spent_known = False
        self.paused = False
        self.skipped_models: set[str] = set()
        self.controls: deque[dict[str, Any]] = deque(maxlen=10)
        self.halt: str | None = None
        self.started_at: float | None = None
        self.finished_since_start = 0
        #: Jobs whose cell changed since :meth:`changed_cells` was last asked.
        self._dirty: set[Key] = set()
        self.version = 0

    # --- input ----------------------------------------------------------------------------

    def load_summary(self, summary: Mapping[str, Any]) -> None:
        """Start again from ``summary``'s rows (a new invocation's, or the first read)."""
        self.begin_summary()
        rows = summary.get("jobs")
        for row in rows if isinstance(rows, list) else ():
            if isinstance(row, dict):
                self.add_row(row)
        self.end_summary(summary)

    def begin_summary(self) -> None:
        """Forget the jobs: a summary's rows follow (:meth:`add_row`), then
        :meth:`end_summary`. A row at a time, so a reader need not hold them all."""
        self.jobs.clear()
        self.models.clear()
        self._clusters.clear()
        self._shapes.clear()
        self.model_order.clear()
        self.durations.clear()
        self.running.clear()
        self.steps.clear()
        self.spent_usd, self.spent_known = 0.0, False

    def end_summary(self, summary: Mapping[str, Any]) -> None:
        self.state = str(summary.get("state", "unknown"))
        self._dirty = set(self.jobs)
        self.version += 1

    def add_row(self, row: Mapping[str, Any]) -> None:
        """One job row of the summary."""
        case, model = row.get("case"), row.get("model")
        if not isinstance(case, str) or not isinstance(model, str):
            return
        repeat = row.get("repeat", 1)
        key = (case, sys.intern(model), repeat if type(repeat) is int else 1)
        status = row.get("status")
        attempts = row.get("attempts")
        job = JobState(
            status if isinstance(status, str) else "pending",
            number(row.get("duration_seconds")),
            text(row.get("failure_category")),
            text(row.get("reason") or row.get("skip_reason")),
            text(row.get("run_dir")),
            attempts if type(attempts) is int else 0,
        )
        self._add(key, job)
        self._count_usage(row.get("usage"))
        if job["status"] == "running":
            self.running[key] = math.nan  # started before the view: elapsed unknown

    def apply(self, event: Mapping[str, Any], now: float) -> None:
        """One event of ``events.jsonl``, read at ``now`` (seconds since the epoch: a start's
        own ``t`` is used when it has one)."""
        kind = event.get("event")
        key = event_key(event)
        if kind == "batch_start":
            self.state = "running"
            self.started_at = stamp(event, now)
            self.finished_since_start = 0
            self.halt = None
            self.paused = False
            self.skipped_models.clear()
        elif kind == "start" and key is not None:
            # This attempt's run dir (none until it is made): not the previous attempt's.
            self._set(
                key,
                status="running",
                attempts=event.get("attempt"),
                reason=None,
                run_dir=text(event.get("run_dir")),
            )
            self.running[key] = stamp(event, now)
        elif kind == "finish" and key is not None:
            status = event.get("status")
            duration = number(event.get("duration_seconds"))
            self._set(
                key,
                status=status if status in FINISHED else "error",
                duration=duration,
                category=text(event.get("failure_category")),
                reason=text(event.get("reason")),
                run_dir=text(event.get("run_dir")),
                attempts=event.get("attempt"),
            )
            self.running.pop(key, None)
            self.steps.pop(key, None)
            self.finished_since_start += 1
            if duration is not None:
                self.durations.setdefault(key[1], deque(maxlen=DURATIONS_KEPT)).append(duration)
            self._count_usage(event.get("usage"))
            # A job listed once leaves the list when a later attempt passes: the list is of
            # jobs that did not pass, not of attempts that did not.
            self._unlist(key)
            if status != "passed":
                self.failures.appendleft({
                    "case": key[0], "model": key[1], "repeat": key[2],
                    "status": self.jobs[key]["status"],
                    "category": self.jobs[key]["category"],
                    "reason": self.jobs[key]["reason"],
                })  # fmt: skip
        elif kind == "step" and key is not None:
            step = event.get("step")
            if key in self.running and isinstance(step, str):
                self.steps[key] = step
        elif kind == "skip" and key is not None:
            self._set(key, status="skipped", reason=text(event.get("reason")))
            self.running.pop(key, None)
        elif kind in ("lost", "killed", "start_refused") and key is not None:
            self._set(key, status="pending")
            self.running.pop(key, None)
        elif kind == "breaker":
            model, state = event.get("model"), event.get("state")
            if isinstance(model, str) and isinstance(state, str):
                self.breakers[model] = state
        elif kind == "concurrency":
            model = event.get("model")
            if isinstance(model, str):
                self.limits[model] = {"current": event.get("current"), "max": event.get("max")}
        elif kind == "pool":
            self._pool(event)
        elif kind == "control":
            self._control(event)
        elif kind == "interrupt":
            self.state = "stopping"
        elif kind == "halt":
            self.halt = text(event.get("message"))
        elif kind == "batch_end":
            self.state = str(event.get("state", "unknown"))
            self.running.clear()
            self.steps.clear()
        self.version += 1

    def _pool(self, event: Mapping[str, Any]) -> None:
        name = event.get("pool")
        if not isinstance(name, str):
            return
        sweeps = event.get("sweeps")
        self.pools[name] = {
            "pool": name,
            **{
                field: number(event.get(field))
                for field in ("concurrency", "rate", "max_concurrent", "max_rate")
            },
            "running": number(event.get("running")),
            "refused": number(event.get("refused")),
            "sweeps": [text(s) for s in sweeps] if isinstance(sweeps, list) else [],
        }

    def _control(self, event: Mapping[str, Any]) -> None:
        self.controls.appendleft({
            "action": text(event.get("action")), "model": text(event.get("model")),
            "number": event.get("number"), "outcome": text(event.get("outcome")),
            "message": text(event.get("message")), "source": text(event.get("source")),
        })  # fmt: skip
        if event.get("outcome") != "taken":
            return
        action, model = event.get("action"), event.get("model")
        if action == "pause":
            self.paused = True
        elif action == "continue":
            self.paused = False
        elif action == "skip" and isinstance(model, str):
            self.skipped_models.add(model)
        elif action == "unskip" and isinstance(model, str):
            self.skipped_models.discard(model)
        elif action == "concurrency" and isinstance(model, str):
            number = event.get("number")
            if type(number) is int:  # the model's limit from now on, set by hand
                self.limits[model] = {"current": number, "max": number}

    def _unlist(self, key: Key) -> None:
        kept = [f for f in self.failures if (f["case"], f["model"], f["repeat"]) != key]
        if len(kept) != len(self.failures):
            self.failures = deque(kept, maxlen=LATEST_FAILURES)

    def _add(self, key: Key, job: JobState) -> None:
        old = self.jobs.get(key)
        if old is not None:
            self.models[key[1]][old["status"]] -= 1
        if key[1] not in self.models:
            self.models[key[1]] = Counter()
            self.model_order.append(key[1])
        self.jobs[key] = job
        self.models[key[1]][job["status"]] += 1
        self._judged(key, None if old is None else old["status"], job["status"])
        if job["status"] in FINISHED and job["duration"] is not None:
            self.durations.setdefault(key[1], deque(maxlen=DURATIONS_KEPT)).append(job["duration"])

    def _set(self, key: Key, **fields: Any) -> None:
        job = self.jobs.get(key)
        if job is None:  # a job the summary did not have yet (a resume that added it)
            job = JobState()
            self._add(key, job)
        counts = self.models[key[1]]
        before = job["status"]
        counts[before] -= 1
        for name, value in fields.items():
            if name == "attempts":
                if type(value) is int:
                    job["attempts"] = value
            elif value is not None or name in ("reason", "category", "run_dir"):
                # None is news for these: a passed retry has no category, its first try had;
                # a new attempt has no record or run dir until it makes one.
                job[name] = value
        counts[job["status"]] += 1
        self._judged(key, before, job["status"])
        self._dirty.add(key)

    def _judged(self, key: Key, before: str | None, after: str) -> None:
        """Move ``key``'s case x model to its new (passed, judged) pair."""
        passed = (after == "passed") - (before == "passed")
        judged = (after in _JUDGED) - (before in _JUDGED)
        if not (passed or judged):
            return
        cluster = (key[0], key[1])
        shapes = self._shapes.setdefault(key[1], Counter())
        was = self._clusters.get(cluster, (0, 0))
        if was[1]:
            shapes[was] -= 1
            if not shapes[was]:
                del shapes[was]
        now = (was[0] + passed, was[1] + judged)
        self._clusters[cluster] = now
        if now[1]:
            shapes[now] += 1

    def _count_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            cost = number(usage.get("cost_usd"))
            if cost is not None:
                self.spent_usd += cost
                self.spent_known = True

    # --- output ---------------------------------------------------------------------------

    def overview(self, now: float) -> dict[str, Any]:
        """Everything the page's top part shows, as plain JSON data."""
        total = len(self.jobs)
        totals = Counter[str]()
        for counts in self.models.values():
            totals.update(counts)
        done = sum(totals[s] for s in FINISHED) + totals["skipped"]
        models = [self._model_row(name, now) for name in self.model_order]
        running = []
        for key, since in sorted(self.running.items(), key=lambda item: sort_nan(item[1])):
            elapsed = None if math.isnan(since) else max(0.0, now - since)
            typical = self._median(key[1])
            running.append({
                "case": key[0], "model": key[1], "repeat": key[2], "step": self.steps.get(key),
                "elapsed": None if elapsed is None else round(elapsed, 1),
                "typical": None if typical is None else round(typical, 1),
                "stuck": bool(elapsed is not None and typical and elapsed > STUCK_FACTOR * typical),
            })  # fmt: skip
        rate = self._rate(now)
        remaining = total - done
        eta = None if not rate or self.state not in ("running", "stopping") else remaining / rate
        projected = None
        finished = sum(totals[s] for s in FINISHED)
        if self.spent_known and finished:
            projected = round(self.spent_usd / finished * (finished + remaining), 4)
        return {
            "name": self.name,
            "state": self.state,
            "paused": self.paused,
            "halt": self.halt,
            "jobs": total,
            "done": done,
            "totals": {status: totals[status] for status in STATUSES},
            "eta_seconds": None if eta is None else round(eta),
            "spent_usd": round(self.spent_usd, 4) if self.spent_known else None,
            "projected_usd": projected,
            "models": models,
            "running": running[:50],
            "running_count": len(running),
            "failures": list(self.failures),
            "controls": list(self.controls),
            "pools": [self.pools[name] for name in sorted(self.pools)],
            "repeats": any(key[2] > 1 for key in self.jobs),
            "version": self.version,
        }

    def _model_row(self, name: str, now: float) -> dict[str, Any]:
        counts = self.models[name]
        passed, failed, error = counts["passed"], counts["failed"], counts["error"]
        # The interval ``batch stats`` gives its adjusted_pass_rate: a case x model's repeats
        # are one cluster (Wilson's when each has one sample; docs/stats.md).
        shapes = self._shapes.get(name, Counter())
        interval = clustered_proportion(
            {(float(p), float(n)): count for (p, n), count in shapes.items()}, passed + failed
        )
        rate = None if passed + failed == 0 else passed / (passed + failed)
        return {
            "model": name,
            **{status: counts[status] for status in STATUSES},
            "adjusted_pass_rate": None if rate is None else round(rate, 4),
            "low": None if interval is None or interval.low is None else round(interval.low, 4),
            "high": None if interval is None or interval.high is None else round(interval.high, 4),
            "breaker": self.breakers.get(name, "closed"),
            "limit": self.limits.get(name),
            "skipped_by_hand": name in self.skipped_models,
            "error_count": error,
        }

    def _median(self, model: str) -> float | None:
        kept = self.durations.get(model)
        return statistics.median(kept) if kept else None

    def _rate(self, now: float) -> float | None:
        """Jobs finished per second in this invocation."""
        if self.started_at is None or self.finished_since_start == 0:
            return None
        elapsed = now - self.started_at
        return self.finished_since_start / elapsed if elapsed > 0 else None

    def repeats(self) -> dict[str, Any] | None:
        """With repeats, per model: pass@1, pass@k and pass^k at the largest k, flaky cases
        (batch.stats.repeats); None without. A pass over every job: the page asks
        for it when it loads, the live updates do not carry it."""
        if not any(key[2] > 1 for key in self.jobs):
            return None
        from batch.stats.repeats import CaseSamples, repeat_stats

        per_model: dict[str, dict[str, list[int]]] = {}
        for (case, model, _), job in self.jobs.items():
            tally = per_model.setdefault(model, {}).setdefault(case, [0, 0, 0])
            if job["status"] in ("passed", "failed"):
                tally[0] += 1
                tally[1] += job["status"] == "passed"
            elif job["status"] == "error":
                tally[2] += 1
        figures = {}
        for model, cases in per_model.items():
            stats = repeat_stats([CaseSamples(c, n, p, e) for c, (n, p, e) in cases.items()])
            k = stats["k_max"]
            figures[model] = {
                "k": k,
                "pass_at_1": stats["pass_at_k"].get("1"),
                "pass_at_k": stats["pass_at_k"].get(str(k)),
                "pass_hat_k": stats["pass_hat_k"].get(str(k)),
                "flaky": len(stats["flaky_cases"]),
            }
        return figures

    def cells(self) -> dict[str, Any]:
        """The grid: every job when there are at most :data:`GRID_CELLS`, else only the ones
        that did not pass or are running (the models' rows above hold the rest)."""
        if len(self.jobs) <= GRID_CELLS:
            chosen: Iterable[Key] = self.jobs
            folded = False
        else:
            chosen = (
                k for k, job in self.jobs.items() if job["status"] not in ("passed", "pending")
            )
            folded = True
        listed = [cell(key, self.jobs[key]) for key in chosen]
        return {"folded": folded, "jobs": len(self.jobs), "cells": listed[:GRID_CELLS]}

    def changed_cells(self) -> list[dict[str, Any]]:
        """The cells changed since the last call (for a live page's update)."""
        changed = [cell(key, self.jobs[key]) for key in self._dirty if key in self.jobs]
        self._dirty = set()
        return changed[:GRID_CELLS]

    def job(self, key: Key) -> dict[str, Any] | None:
        found = self.jobs.get(key)
        return (
            None
            if found is None
            else {"case": key[0], "model": key[1], "repeat": key[2], **found.as_dict()}
        )
