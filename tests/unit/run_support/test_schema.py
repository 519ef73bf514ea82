"""docs/schemas/run-meta.schema.json is made from RunMeta's declaration (run_support/schema.py)."""

from __future__ import annotations

import subprocess
import sys

from helpers.paths import REPO_ROOT

from run_support import schema


def test_the_committed_schema_is_the_generated_one_byte_for_byte() -> None:
    committed = (REPO_ROOT / "docs" / "schemas" / "run-meta.schema.json").read_bytes()
    assert committed == schema.text().encode(), (
        "docs/schemas/run-meta.schema.json is not what RunMeta declares: "
        "run `python -m run_support.schema > docs/schemas/run-meta.schema.json`"
    )


def test_every_field_a_record_is_written_with_has_a_property() -> None:
    properties = schema.schema()["properties"]
    written = {f.name for f in schema.attrs.fields(schema.RunMeta)} - {"extra"}
    assert set(properties) == written


def test_the_command_prints_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "run_support.schema"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    assert done.stdout == schema.text()
