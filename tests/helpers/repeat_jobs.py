"""A job that says which repeat it is, and the check that an executor ran every repeat once.

For the executors' end-to-end tests (``tests/unit/executors/test_dask.py``,
``tests/e2e/test_slurm.py``): whoever runs the attempt (the driver, a Dask worker, a
worker inside a Slurm job) must give the job its repeat as ``{repeat}`` and as
``BATCH_REPEAT``, and record it in ``run-meta.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.fake_jobs import write_job_script

if TYPE_CHECKING:
    from conftest import BatchCli

#: Appends ``CASE MODEL {repeat} $BATCH_REPEAT`` (tab-separated) to ``DIR/repeats.txt``.
REPEAT_JOB = """
import os, sys
from pathlib import Path

case, model, repeat, here = sys.argv[1:5]
with open(Path(here) / "repeats.txt", "a") as seen:
    seen.write(f"{case}\\t{model}\\t{repeat}\\t{os.environ['BATCH_REPEAT']}\\n")
"""


def repeat_command(directory: Path) -> list[str]:
    """The sweep's ``command`` running :data:`REPEAT_JOB`, its lines in ``directory``."""
    job = write_job_script(directory, REPEAT_JOB, name="repeat_job.py")
    return [str(job), "{case}", "{model}", "{repeat}", os.fspath(directory)]


def runs_seen(directory: Path) -> list[tuple[str, str, str, str]]:
    """Every run of :data:`REPEAT_JOB` so far: (case, model, ``{repeat}``, ``BATCH_REPEAT``)."""
    path = directory / "repeats.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return sorted(tuple(line.split("\t")) for line in lines)  # type: ignore[misc]


def triples(cases: list[str], models: list[str], repeats: int) -> list[tuple[str, str, int]]:
    return sorted((c, m, r) for c in cases for m in models for r in range(1, repeats + 1))


def check_every_repeat_ran_once(
    cli: BatchCli, batch_dir: Path, expected: list[tuple[str, str, int]]
) -> None:
    """Each (case, model, repeat) ran once, saw its repeat, has one record saying it (a
    record without ``repeat`` is repeat 1) and one passed summary row."""
    assert runs_seen(cli.dir) == sorted((c, m, str(r), str(r)) for c, m, r in expected)
    records: list[dict[str, Any]] = cli.records(batch_dir)
    assert sorted((r["test_case"], r["model"], r.get("repeat", 1)) for r in records) == expected
    # Repeat 1 is written as every record was before repeats: without the key.
    assert all(r["repeat"] != 1 for r in records if "repeat" in r)
    rows = cli.summary(batch_dir)["jobs"]
    got = sorted((row["case"], row["model"], row.get("repeat", 1), row["status"]) for row in rows)
    assert got == [(c, m, r, "passed") for c, m, r in expected]
    assert json.loads((batch_dir / "batch-summary.json").read_text())["state"] == "complete"
