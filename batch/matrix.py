"""The job matrix: every (case, model) pair of a sweep in start order, and CLI selection."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from batch.jobs import Job
from batch.sweep import Sweep


def build_jobs(sweep: Sweep) -> list[Job]:
    """Jobs in start order: ``interleave`` puts cases outer and models inner, so consecutive
    starts hit different providers; ``model-major`` runs all of one model's jobs as a block.
    """
    cases, models = sweep.cases, sweep.models

    def job(case_index: int, model_index: int) -> Job:
        case = cases[case_index]
        timeout = case.timeout if case.timeout is not None else sweep.timeout
        return Job(
            case=case.id, model=models[model_index].id, params=dict(case.params), timeout=timeout
        )

    if sweep.order == "model-major":
        return [job(c, m) for m in range(len(models)) for c in range(len(cases))]
    return [job(c, m) for c in range(len(cases)) for m in range(len(models))]


def _matches(name: str, globs: Sequence[str]) -> bool:
    return not globs or any(fnmatchcase(name, pattern) for pattern in globs)


def select(
    jobs: Sequence[Job], case_globs: Sequence[str] = (), model_globs: Sequence[str] = ()
) -> list[Job]:
    """The jobs ``--cases GLOB`` and ``--models GLOB`` (each repeatable) pick."""
    return [j for j in jobs if _matches(j.case, case_globs) and _matches(j.model, model_globs)]


def blocks(jobs: Sequence[Job], order: str) -> list[list[Job]]:
    """Scheduling blocks: one per model under ``model-major`` (a block starts when the one
    before has finished), a single block otherwise."""
    if order != "model-major":
        return [list(jobs)]
    by_model: dict[str, list[Job]] = {}
    for job in jobs:
        by_model.setdefault(job.model, []).append(job)
    return list(by_model.values())
