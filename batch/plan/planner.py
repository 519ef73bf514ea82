"""What one invocation will do, decided before anything runs.

:func:`prepare_plan` loads the sweep, builds the job matrix and finds the batch dir to
resume; :func:`decide_jobs` decides every job against the ledger (run, carry, retry) and
the ``--cases``/``--models`` selection. ``batch plan`` shows the result; ``batch SWEEP``
takes the batch dir's lock between the two steps and then executes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from operator import attrgetter
from pathlib import Path
from typing import Any

import attrs

from batch.errors import UsageError
from batch.layout import model_dir_name
from batch.plan import batch_dir as batchdir
from batch.plan.case_order import resolve_seed
from batch.plan.jobs import NOT_SELECTED, Job
from batch.plan.matrix import build_jobs, model_repeats, select
from batch.plan.resume import apply_resume, decide
from batch.plan.sweep_diff import sweep_changes
from batch.policies.attempts import AttemptBudget
from batch.policies.deadline import Deadline
from batch.policies.halt import HaltConfig
from batch.sweep.features.executor import ExecutorSpec
from batch.sweep.load import Sweep, load_sweep
from batch.sweep.snapshot import read_snapshot, same_snapshot, snapshot_data
from run_support.heap import gc_paused
from run_support.results import BlockRecords, Ledger, RunMeta

_decision = attrgetter("decision")


@attrs.frozen
class RunOptions:
    output: Path | None = None
    #: None: a new batch dir; "": resume the newest; otherwise the batch dir to resume.
    resume: str | None = None
    retry_failed: bool = False
    retry_categories: tuple[str, ...] = ()
    max_concurrent: int | None = None
    case_globs: tuple[str, ...] = ()
    model_globs: tuple[str, ...] = ()
    progress: bool = True
    #: None: the sweep's ``executor:`` (default local).
    executor: str | None = None
    #: A Dask scheduler address; implies ``executor="dask"``.
    scheduler: str | None = None
    #: ``--halt``: replaces the sweep's ``halt`` for this invocation; None: the sweep's.
    halt: HaltConfig | None = None
    #: ``--deadline``: start no job that would end after it (docs/policies.md).
    deadline: Deadline | None = None
    #: ``--max-attempts``: every job's attempt budget for this invocation (None: the sweep's).
    max_attempts: int | None = None
    #: ``--repeats``: samples of every case x model, over the sweep's and its models'.
    repeats: int | None = None
    #: ``--view``: serve the batch's live page beside the run (batch view).
    view: bool = False


@attrs.define
class Plan:
    """Everything decided before the first job starts."""

    sweep: Sweep
    jobs: list[Job]
    batch_dir: Path | None
    carried: int = 0
    retried: int = 0
    to_run: int = 0
    unreadable: list[tuple[str, str]] = attrs.Factory(list)
    #: True when ``batch_dir`` is an existing batch being resumed (not a new one).
    resuming: bool = False
    #: What differs from the sweep the batch last ran (``batch.plan.sweep_diff``), one line each.
    changes: list[str] = attrs.Factory(list)
    #: How many attempts each job may spend (the sweep's, its models', ``--max-attempts``).
    attempt_budget: AttemptBudget = attrs.Factory(AttemptBudget)
    #: The batch's latest snapshot holds this very sweep (found while deciding a resume), so
    #: the driver need not read it again to know it writes none.
    snapshot_current: bool = False
    #: The newest record of every job decided ``retry`` (``--retry-failed``): what such a
    #: job's summary row keeps when the invocation stops before it gets to the job.
    retried_records: dict[tuple[str, str, int], RunMeta] = attrs.field(
        factory=dict, repr=False, eq=False
    )
    #: ``stop_when``'s seed was drawn by this invocation: the batch keeps it once it runs
    #: (``batch.plan.case_order.write_seed``).
    seed_drawn: bool = False


def undecided_jobs(sweep: Sweep) -> list[Job]:
    """The sweep's jobs, none decided yet (unless resuming, the plan's as they are)."""
    return build_jobs(sweep, "new batch dir")


# Both build a few hundred thousand small acyclic objects (cases, jobs, records): the cyclic
# collector's passes over them find nothing and cost a fifth of a 100,000-job plan.
@gc_paused()
def prepare_plan(sweep_path: Path, options: RunOptions) -> Plan:
    """The sweep, its jobs and the batch dir to resume (if any); reads no ledger yet.

    The driver takes the batch dir's lock between this and :func:`decide_jobs`, so the
    ledger it decides against cannot change under it.
    """
    sweep = load_sweep(sweep_path)
    if options.output is not None:
        sweep = attrs.evolve(sweep, output=options.output)
    if options.max_concurrent is not None:
        sweep = attrs.evolve(sweep, max_concurrent=options.max_concurrent)
    if options.repeats is not None:
        # For this invocation, as if the sweep said it: its snapshot and diff say so too.
        models = tuple(attrs.evolve(model, repeats=None) for model in sweep.models)
        sweep = attrs.evolve(sweep, repeats=options.repeats, models=models)
    try:
        executor = choose_executor(sweep.executor, options.executor, options.scheduler)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sweep = attrs.evolve(sweep, executor=executor)
    problem = None if options.resume else batchdir.output_root_problem(sweep.output)
    if problem:  # explicit --resume DIR does not use the output root
        raise UsageError(problem)
    resume = options.resume
    if resume is None and (options.retry_failed or options.retry_categories):
        resume = ""  # --retry-failed implies --resume
    batch_dir = None
    if resume is not None:  # raises BatchDirError, a UsageError
        batch_dir = batchdir.resolve_resume_dir(resume, sweep.output, sweep.name)
    order = resolve_seed(sweep, batch_dir)  # stop_when's random order: before any job
    sweep = order.sweep
    jobs = undecided_jobs(sweep)
    if not select(jobs, options.case_globs, options.model_globs):
        raise UsageError("no job matches --cases/--models")
    plan = Plan(sweep=sweep, jobs=jobs, batch_dir=batch_dir)
    plan.seed_drawn = order.drawn
    plan.attempt_budget = attempt_budget(sweep, options.max_attempts)
    plan.resuming = batch_dir is not None
    return plan


@gc_paused()
def decide_jobs(plan: Plan, options: RunOptions, ledger: Ledger | None = None) -> None:
    """Decide every job against the ledger (when resuming: through ``ledger``, the batch
    dir's handle, or one of its own) and the ``--cases``/``--models`` selection."""
    if plan.resuming and ledger is None:
        assert plan.batch_dir is not None
        with Ledger(plan.batch_dir) as own:
            _decide_jobs(plan, options, own)
    else:
        _decide_jobs(plan, options, ledger)


def _decide_jobs(plan: Plan, options: RunOptions, ledger: Ledger | None) -> None:
    sweep = plan.sweep
    recorded: Mapping[tuple[str, str, int], RunMeta] = {}
    if plan.resuming:
        assert plan.batch_dir is not None and ledger is not None
        compared = _compare_snapshot(plan.batch_dir, sweep, None)
        # The usual resume decides a model dir at a time, holding no more than one dir's
        # records (a million jobs: the records would outweigh the jobs); the rest, and
        # any ledger where that cannot be exact, read every record first.
        streamed = False
        if compared is not None and not (options.case_globs or options.model_globs):
            streamed = _decide_by_model_dir(plan, options, compared, ledger)
        if not streamed:
            found = ledger.load()
            plan.unreadable, recorded = found.unreadable, found
            plan.jobs = apply_resume(
                plan.jobs,
                recorded,
                **_resume_options(plan, options),
                in_place=True,  # the plan's own jobs: no copy of 100,000 of them
            ).jobs
            if compared is None:
                compared = _compare_snapshot(plan.batch_dir, sweep, recorded)
                assert compared is not None
            plan.changes, plan.snapshot_current = compared
            plan.changes += beyond_repeats(sweep, recorded)
    if options.case_globs or options.model_globs:  # without, every job is chosen
        chosen = {job.key for job in select(plan.jobs, options.case_globs, options.model_globs)}
        for index, job in enumerate(plan.jobs):
            if not job.needs_run or job.key in chosen:
                continue
            record = recorded.get(job.key)
            if record is not None:
                # Left out, so not retried: its recorded result stands, as under --resume.
                job = plan.jobs[index] = decide(
                    job, record, (), sweep.non_model_categories, sweep.steps
                )
                job.selected = False
            else:
                job.selected = False
                job.decision, job.status = "carry", "skipped"
                job.decision_reason = NOT_SELECTED
    decisions = Counter(map(_decision, plan.jobs))  # one pass, in C
    plan.carried, plan.retried = decisions["carry"], decisions["retry"]
    plan.to_run = len(plan.jobs) - plan.carried


def beyond_repeats(sweep: Sweep, recorded: Iterable[tuple[str, str, int]]) -> list[str]:
    """A line per model whose batch holds records of repeats past the sweep's count for
    it (``repeats`` lowered): they are kept, and left out of the summary and the stats."""
    counts = {model.id: model_repeats(sweep, model.id) for model in sweep.models}
    past = _past_repeats(recorded, counts, {case.id for case in sweep.cases})
    return _beyond_lines(counts, past)


def _past_repeats(
    keys: Iterable[tuple[str, str, int]], counts: Mapping[str, int], cases: Collection[str]
) -> Counter[str]:
    return Counter(
        model
        for case, model, repeat in keys
        if model in counts and repeat > counts[model] and case in cases
    )


def _beyond_lines(counts: Mapping[str, int], past: Counter[str]) -> list[str]:
    return [
        f"{model}: {past[model]} recorded {'run' if past[model] == 1 else 'runs'} of repeats "
        f"past {counts[model]} kept, left out of the summary and the stats"
        for model in counts
        if past[model]
    ]


def _resume_options(plan: Plan, options: RunOptions) -> dict[str, Any]:
    """:func:`apply_resume`'s keywords for this plan and invocation."""
    return {
        "retry_failed": options.retry_failed,
        "retry_categories": options.retry_categories or None,
        "non_model_categories": plan.sweep.non_model_categories,
        "steps": plan.sweep.steps,
        "budget": plan.attempt_budget,
        "retried": plan.retried_records,
    }


class _NotAtHome(Exception):
    """A record outside its model's own dir: a dir at a time cannot decide exactly."""


def _decide_by_model_dir(
    plan: Plan, options: RunOptions, compared: tuple[list[str], bool], ledger: Ledger
) -> bool:
    """Decide the plan's jobs a model dir at a time, as the ledger is read; False, with
    the jobs as they were, when a record is not in its model's own dir (moved by hand):
    its pair's newest record may then be in another dir, so every record must be read
    before any job of it is decided.

    A model dir's jobs are decided once that dir is read, against its newest records,
    exactly as :func:`apply_resume` over the whole ledger would: every record of those
    jobs is in that dir. Its records are dropped then, so no more than one dir's are held.
    """
    assert plan.batch_dir is not None
    sweep = plan.sweep
    home = {model.id: model_dir_name(model.id) for model in sweep.models}
    jobs_in: dict[str, list[Job]] = {}
    for job in plan.jobs:
        jobs_in.setdefault(home[job.model], []).append(job)
    counts = {model.id: model_repeats(sweep, model.id) for model in sweep.models}
    cases = {case.id for case in sweep.cases}
    past: Counter[str] = Counter()
    keywords = _resume_options(plan, options)

    def decide_dir(model_dir: str, newest: BlockRecords) -> None:
        for model in {model for _, model, _ in newest}:
            dir_of = home.get(model)
            if dir_of is None:
                dir_of = home[model] = model_dir_name(model)
            if dir_of != model_dir:
                raise _NotAtHome(model)
        past.update(_past_repeats(newest, counts, cases))
        apply_resume(jobs_in.pop(model_dir, ()), newest, **keywords, in_place=True)

    try:
        found = ledger.read_blocks(decide_dir)
    except _NotAtHome:
        plan.jobs = undecided_jobs(sweep)
        plan.retried_records.clear()
        return False
    for jobs in jobs_in.values():  # models with no dir yet: nothing recorded
        apply_resume(jobs, {}, **keywords, in_place=True)
    plan.unreadable = found.unreadable
    plan.changes, plan.snapshot_current = compared
    plan.changes += _beyond_lines(counts, past)
    return True


def attempt_budget(sweep: Sweep, override: int | None = None) -> AttemptBudget:
    """The sweep's ``max_attempts``, its models' own, and ``--max-attempts`` over both."""
    per_model = {m.id: m.max_attempts for m in sweep.models if m.max_attempts is not None}
    return AttemptBudget(default=sweep.max_attempts, per_model=per_model, override=override)


def _compare_snapshot(
    batch_dir: Path, sweep: Sweep, recorded: Mapping[tuple[str, str, int], RunMeta] | None
) -> tuple[list[str], bool] | None:
    """What differs from the batch's latest snapshot (nothing when its data equals this
    sweep's: the usual resume writes no YAML), and whether it equals this sweep's. With
    ``recorded`` None: None where the answer needs the records (the sweep changed)."""
    found = batchdir.latest_snapshot(batch_dir)
    if found is None:
        return [], False
    new = snapshot_data(sweep)
    if same_snapshot(found[1], new):  # the usual resume: 10,000 cases compared unparsed
        return [], True
    try:
        old = read_snapshot(found[1])
    except ValueError:
        return [f"cannot read {found[0]} to compare with this sweep"], False
    if old == new:
        return [], True
    if not isinstance(old, dict):
        return [f"cannot read {found[0]} to compare with this sweep"], False
    if recorded is None:
        return None
    changes = sweep_changes(
        old,
        new,
        recorded_models=Counter(model for _, model, _ in recorded),
        recorded_cases=Counter(case for case, _, _ in recorded),
    )
    return changes, False


def make_plan(sweep_path: Path, options: RunOptions) -> Plan:
    """Decide every job of the sweep (``batch plan``); writes nothing in the batch dir
    (the ledger's cache is the reader's own, outside it)."""
    plan = prepare_plan(sweep_path, options)
    decide_jobs(plan, options)
    return plan


def choose_executor(
    from_sweep: ExecutorSpec, kind: str | None = None, scheduler: str | None = None
) -> ExecutorSpec:
    """The command line's ``--executor``/``--scheduler`` over the sweep's ``executor:``.

    ``--scheduler`` alone means dask; ``--executor dask`` alone keeps the sweep's scheduler
    if it names one, else a local cluster. Raises ``ValueError`` for ``local`` + scheduler.
    """
    if scheduler is not None:
        if kind not in (None, "dask"):
            raise ValueError("--scheduler needs --executor dask")
        return ExecutorSpec(kind="dask", scheduler=scheduler)
    if kind is None or kind == from_sweep.kind:
        return from_sweep
    return ExecutorSpec(kind=kind)
