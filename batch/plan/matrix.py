"""The job matrix: every (case, model) pair of a sweep in start order, and CLI selection."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from batch.plan.jobs import Job
from batch.sweep.load import CaseSpec, ModelSpec, Sweep


def build_jobs(sweep: Sweep) -> list[Job]:
    """Jobs in start order: ``interleave`` puts cases outer and models inner, so consecutive
    starts hit different providers; ``model-major`` runs all of one model's jobs as a block.
    """

    def job(case: CaseSpec, model: ModelSpec) -> Job:
        timeout = case.timeout if case.timeout is not None else sweep.timeout
        return Job(
            case=case.id,
            model=model.id,
            params=dict(case.params),
            timeout=timeout,
            case_row=case.row,
        )

    if sweep.order == "model-major":
        return [job(case, model) for model in sweep.models for case in sweep.cases]
    return [job(case, model) for case in sweep.cases for model in sweep.models]


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
