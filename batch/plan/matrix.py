"""The job matrix: every (case, model, repeat) of a sweep in start order, and CLI selection."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from operator import attrgetter

from batch.plan.case_order import shuffled
from batch.plan.jobs import Job
from batch.sweep.load import Sweep


def build_jobs(
    sweep: Sweep, decision_reason: str = "not started", repeats: int | None = None
) -> list[Job]:
    """Jobs in start order: ``interleave`` puts cases outer and models inner, so consecutive
    starts hit different providers; ``model-major`` runs all of one model's jobs as a block.
    With repeats, every (case, model) is N jobs, repeat 1..N: ``interleave`` runs all of
    repeat 1 before repeat 2 (an interrupted sweep has whole passes), ``model-major`` a
    model's repeats within its block. ``repeats`` (``--repeats``) replaces the sweep's and
    its models' counts. With ``stop_when`` the cases run in the batch's random order
    (:mod:`batch.plan.case_order`) and a case's repeats together. Each job is undecided
    (``run``), with ``decision_reason`` as its reason.
    """
    counts = {model.id: model_repeats(sweep, model.id, repeats) for model in sweep.models}
    default = sweep.timeout
    rule = sweep.stop_when
    specs = (
        sweep.cases if rule is None else shuffled(sweep.cases, _seed(rule.seed), attrgetter("id"))
    )
    cases = [
        (case.id, case.params, default if case.timeout is None else case.timeout, case.row)
        for case in specs
    ]
    if rule is not None:
        # A stop reads whole cases in the random order: a case's repeats run together.
        if sweep.order == "model-major":
            triples = (
                (case, model, r)
                for model, n in counts.items()
                for case in cases
                for r in range(1, n + 1)
            )
        else:
            triples = (
                (case, model, r)
                for case in cases
                for r in range(1, max(counts.values(), default=1) + 1)
                for model, n in counts.items()
                if r <= n
            )
    elif sweep.order == "model-major":
        triples = (
            (case, model, r)
            for model, n in counts.items()
            for r in range(1, n + 1)
            for case in cases
        )
    else:
        top = max(counts.values(), default=1)
        triples = (
            (case, model, r)
            for r in range(1, top + 1)
            for case in cases
            for model, n in counts.items()
            if r <= n
        )
    # Every field by position, in Job's order (tests/unit/plan/test_matrix.py holds this to
    # Job's keyword defaults): a third cheaper than keywords, 100,000 times on a large plan.
    # A case's jobs share its params dict, which nothing writes to: a copy per job was 64
    # bytes and up, a million times (docs/design.md, "What the driver holds per job").
    return [
        Job(
            case_id, model, params, timeout, "pending", "run", decision_reason, False,
            None, None, 0, None, None, 0, None, None, None, None, row, True, r,
        )
        for (case_id, params, timeout, row), model, r in triples
    ]  # fmt: skip


def _seed(seed: int | None) -> int:
    # Resolved by the planner (batch.plan.case_order.resolve_seed) before any job is built.
    assert seed is not None, "stop_when's seed is resolved before the jobs are built"
    return seed


def model_repeats(sweep: Sweep, model: str, repeats: int | None = None) -> int:
    """How many samples of each case ``model`` takes: ``--repeats``, else the model's own
    ``repeats``, else the sweep's (default 1)."""
    if repeats is not None:
        return repeats
    own = sweep.model(model).repeats
    return sweep.repeats if own is None else own


def matches(name: str, globs: Sequence[str]) -> bool:
    """Whether ``name`` is picked by ``--cases``/``--models`` globs (none given: every name)."""
    return not globs or any(fnmatchcase(name, pattern) for pattern in globs)


def select(
    jobs: Sequence[Job], case_globs: Sequence[str] = (), model_globs: Sequence[str] = ()
) -> list[Job]:
    """The jobs ``--cases GLOB`` and ``--models GLOB`` (each repeatable) pick."""
    if not case_globs and not model_globs:
        return list(jobs)  # every job: no call per job (100,000 on a large resume)
    return [j for j in jobs if matches(j.case, case_globs) and matches(j.model, model_globs)]


def blocks(jobs: Sequence[Job], order: str) -> list[list[Job]]:
    """Scheduling blocks: one per model under ``model-major`` (a block starts when the one
    before has finished), a single block otherwise."""
    if order != "model-major":
        return [list(jobs)]
    by_model: dict[str, list[Job]] = {}
    for job in jobs:
        by_model.setdefault(job.model, []).append(job)
    return list(by_model.values())
