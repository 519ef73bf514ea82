"""The summary row is declared once (``batch.summary.row``): the committed JSON Schema is
the one the declaration makes, the writer writes the declared keys in their order, and
the reader refuses a value of another type for each of them."""

from __future__ import annotations

import pytest
from helpers.builders import make_jobs
from helpers.paths import REPO_ROOT

from batch.summary.read import check_summary
from batch.summary.row import FIELDS, REQUIRED_ROW_KEYS
from batch.summary.schema import schema_text
from batch.summary.write import build_summary, job_row


def test_the_committed_summary_schema_is_the_one_the_declaration_makes() -> None:
    path = REPO_ROOT / "docs" / "schemas" / "batch-summary.schema.json"
    assert path.read_text(encoding="utf-8") == schema_text(), (
        "run: python -m batch.summary.schema > docs/schemas/batch-summary.schema.json"
    )


def test_the_writer_writes_the_declared_keys_in_the_declared_order() -> None:
    [job] = make_jobs(["c1"], ["m"])
    job.status, job.skip_reason, job.repeat, job.score = "skipped", "halted: x", 2, 0.5
    job.usage, job.steps = {"requests": 1}, [{"name": "a", "status": "passed"}]
    row = job_row(job)
    order = list(FIELDS)
    assert list(row) == sorted(row, key=order.index)
    always = [name for name, (_, _, field) in FIELDS.items() if field.always]
    assert [key for key in row if key in always] == always


@pytest.mark.parametrize("key", list(FIELDS))
def test_the_reader_refuses_a_value_of_another_type_for_every_declared_key(key: str) -> None:
    [job] = make_jobs(["c1"], ["m"])
    summary = build_summary(
        [job],
        batch_id="b",
        state="running",
        started_at="2026-12-06T00:00:00Z",
        finished_at=None,
        elapsed_seconds=1.0,
        max_concurrent=1,
    )
    kinds = FIELDS[key][0]
    summary["jobs"][0][key] = {"an": "object"} if dict not in kinds else "a string"
    with pytest.raises(ValueError, match=key if key not in REQUIRED_ROW_KEYS else "string"):
        check_summary(summary)
