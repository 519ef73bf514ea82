"""The parts of the live view (``batch.display.live``): a running job's row, a model's
progress, the ETA column that gives way to what a stopping sweep does, the frame built
when drawn, and the two tables (models, running jobs) made from them.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from rich import progress as rp
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from batch.durations import format_duration_hms
from batch.plan.jobs import FINAL_STATUSES, Job

#: Models listed in the live view, unfinished ones first; the rest are summed up.
MAX_MODEL_ROWS = 8


@attrs.define
class RunningRow:
    job: Job
    label: str
    attempt: int
    started: float
    #: Set while the job waits to be retried: (clock time of the retry, reason).
    retry: tuple[float, str] | None = None
    #: The step a multi-step job is running (local executor only).
    step: str | None = None


@attrs.define
class ModelProgress:
    """One model's progress: jobs in the plan, outcomes so far, its concurrency limit."""

    total: int = 0
    counts: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(sorted(FINAL_STATUSES), 0))
    #: (current, maximum) from :meth:`LiveDisplay.model_limit`, once it was called.
    limit: tuple[int, int] | None = None
    #: Jobs a policy did not start in this invocation (:meth:`LiveDisplay.job_skipped`).
    skipped: int = 0
    #: ``stop_when`` stopped the model: it has its answer (the rest of its jobs skipped).
    stopped: bool = False

    @property
    def done(self) -> int:
        return sum(self.counts.values()) + self.skipped


class EtaColumn(rp.TimeRemainingColumn):
    """``ETA h:mm:ss``, or the task's ``note`` (``stopping``, ``killing``, ``interrupted``)
    once the sweep will not run what the ETA counts on."""

    def __call__(self, task: rp.Task) -> RenderableType:
        # Before rich's 0.5 s render cache: the note shows on the very next frame.
        note = task.fields.get("note")
        if note:
            return Text(note, style="yellow")
        return super().__call__(task)

    def render(self, task: rp.Task) -> Text:
        return Text.assemble("ETA ", super().render(task))


class Frame:
    """The view, built when drawn: rich also draws the live view after each line printed
    above it, and a view built at the previous tick would show stale counts there."""

    def __init__(self, build: Callable[[], RenderableType]) -> None:
        self._build = build

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self._build()


def model_table(
    models: dict[str, ModelProgress], rows: list[RunningRow], shown: Callable[[str], str]
) -> Table:
    """A line per model: done/total, outcomes, running now, and its limit when adaptive."""
    running: dict[str, int] = {}
    for row in rows:
        if row.retry is None:
            running[row.job.model] = running.get(row.job.model, 0) + 1
    order = list(models)  # sweep order
    if len(order) > MAX_MODEL_ROWS:
        # Too many to list: unfinished models first, those are the ones still moving.
        order.sort(key=lambda name: models[name].done >= models[name].total)
    with_limit = any(model.limit is not None for model in models.values())
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False)
    table.add_column("model")
    for column in ("done", "passed", "failed", "error", "running"):
        table.add_column(column, justify="right")
    if with_limit:
        table.add_column("limit", justify="right")
    for name in order[:MAX_MODEL_ROWS]:
        model = models[name]
        cells = [
            f"{model.done}/{model.total}",
            *(str(model.counts[status]) for status in ("passed", "failed", "error")),
            str(running.get(name, 0)),
        ]
        if with_limit:
            cells.append("" if model.limit is None else "{}/{}".format(*model.limit))
        label = Text(shown(name))
        if model.stopped:
            label.append(" stopped: stop_when", style="green")
        table.add_row(label, *cells)
    if len(order) > MAX_MODEL_ROWS:
        table.add_row(f"+{len(order) - MAX_MODEL_ROWS} more models", style="dim")
    return table


def running_table(rows: list[RunningRow], now: float, shown_rows: int) -> Table:
    """Running jobs (longest running first, with their step), then those waiting to be
    retried; ``shown_rows`` of them, the rest summed up."""
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False)
    table.add_column("running")
    table.add_column("attempt", justify="right")
    table.add_column("time", justify="right")
    table.add_column("")
    for row in rows[:shown_rows]:
        # Text cells: a "[...]" in a name is not markup.
        label, attempt = Text(row.label), str(row.attempt)
        if row.retry is None:
            step = Text("" if row.step is None else f"step {row.step}")
            table.add_row(label, attempt, format_duration_hms(now - row.started), step)
        else:
            at, reason = row.retry
            wait = f"retry in {format_duration_hms(max(at - now, 0.0))}"
            table.add_row(label, attempt, wait, Text(reason), style="dim")
    if len(rows) > shown_rows:
        table.add_row(f"+{len(rows) - shown_rows} more", style="dim")
    return table
