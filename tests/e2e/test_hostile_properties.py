"""Every read-only command over summaries and records whose fields have any wrong type.

A summary or record is generated from a sound one with some fields replaced by hostile
values (string for number, list for object, null, NaN, infinities, integers past 64 bits and
past a float, lone surrogates, control characters). ``status``, ``stats`` (every format,
``--by case|model``, two dirs, ``--source records``), ``report`` and ``plan --resume`` must
then exit 0 with valid output, or exit 2 with one line on stderr: never a traceback.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from click.testing import CliRunner
from helpers.builders import make_meta, write_record
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from batch.cli import main
from run_support import ledger_cache, ledger_scan, results

HOSTILE_TEXT = ["", "c1", "m", "passed", "failed", "error", "\ud800", "x\udc80", "a\nb\x1b[2J"]
HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 2**64 + 1, 10**400]),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1.5, -0.0]),
    st.sampled_from(HOSTILE_TEXT),
    st.lists(st.sampled_from([None, 1, "\ud800"]), max_size=2),
    st.dictionaries(
        st.sampled_from(["passed", "\ud800", "x"]), st.sampled_from([1, "n"]), max_size=2
    ),
)
#: What a job or a hand edit may put in a usage field or a duration: anything above, and
#: numbers at and past every bound (a sum of two 1e308 overflows a float; 4,300 nines plus
#: one cannot be written by ``str``).
HOSTILE_NUMBERS = st.one_of(
    st.sampled_from([1e308, 1.7e308, 10**15 + 1, int("9" * 4300), 10**400, 2.0**80, -1]),
    st.floats(),
    st.integers(min_value=0, max_value=10**40),
    HOSTILE_VALUES,
)
USAGES = st.dictionaries(
    st.sampled_from(["input_tokens", "output_tokens", "requests", "cost_usd", "other"]),
    HOSTILE_NUMBERS,
    min_size=1,
    max_size=4,
)
SUMMARY_KEYS = [
    "schema", "batch_id", "state", "started_at", "finished_at", "elapsed_seconds",
    "max_concurrent", "non_model_categories", "totals",
]  # fmt: skip
ROW_KEYS = [
    "case", "model", "status", "duration_seconds", "resumed", "failure_category", "attempts",
    "run_dir", "steps",
]  # fmt: skip
RECORD_KEYS = [
    "test_case", "model", "outcome", "failure_category", "timestamp", "duration_seconds",
    "attempt", "run_dir", "result", "steps", "exit_code",
]  # fmt: skip

SWEEP = "cases: [c1, c2]\nmodels: [m]\ncommand: [python, agent.py]\n"


def sound_summary() -> dict[str, Any]:
    rows = [
        {"case": case, "model": "m", "status": status, "duration_seconds": 1.5,
         "resumed": False, "failure_category": category, "attempts": 1, "run_dir": f"m/{case}"}
        for case, status, category in (("c1", "passed", None), ("c2", "failed", "model_failure"))
    ]  # fmt: skip
    return {
        "schema": 1, "batch_id": "b", "state": "complete", "started_at": "2026-11-30T03:15:00Z",
        "finished_at": None, "elapsed_seconds": 3.0, "max_concurrent": 2,
        "non_model_categories": ["infra_failure"], "jobs": rows,
        "totals": {"passed": 1, "failed": 1, "error": 0, "skipped": 0, "pending": 0, "running": 0},
    }  # fmt: skip


def as_json(document: Any) -> str:
    # ASCII escapes write lone surrogates as \\ud800; NaN and Infinity as Python writes them.
    return json.dumps(document, ensure_ascii=True)


def run_everything(root: Path, batch_dir: Path) -> None:
    """Every read-only command over ``batch_dir``; each exits 0 with valid output or 2 with
    one line."""
    (root / "sweep.yaml").write_text(SWEEP)
    commands = [["status", str(batch_dir)], ["status", str(batch_dir), "--format", "json"]]
    for fmt in ("table", "json", "csv", "markdown"):
        for by in ("model", "case"):
            commands.append(["stats", str(batch_dir), "--format", fmt, "--by", by])
        commands.append(["stats", str(batch_dir), str(batch_dir), "--format", fmt])
        commands.append(["stats", str(batch_dir), "--format", fmt, "--source", "records"])
    commands.append(["report", str(batch_dir), "-o", str(root / "report.html")])
    commands.append(["plan", str(root / "sweep.yaml"), "--resume", str(batch_dir)])
    commands.append(
        ["plan", str(root / "sweep.yaml"), "--resume", str(batch_dir), "--format", "json"]
    )
    runner = CliRunner()
    for command in commands:
        result = runner.invoke(main, command)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{command[0]} {command[2:]}: {result.exception!r}"
        )
        assert result.exit_code in (0, 2), (command, result.output)
        if result.exit_code == 2:
            assert len(result.stderr.splitlines()) == 1, (command, result.stderr)
            continue
        if "json" in command:
            json.loads(result.stdout)
        if "csv" in command:
            list(csv.reader(io.StringIO(result.stdout, newline="")))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    top=st.dictionaries(st.sampled_from(SUMMARY_KEYS), HOSTILE_VALUES, max_size=3),
    row=st.dictionaries(st.sampled_from(ROW_KEYS), HOSTILE_VALUES, min_size=1, max_size=3),
)
def test_no_command_crashes_on_a_summary_with_wrong_types(
    top: dict[str, Any], row: dict[str, Any]
) -> None:
    summary = sound_summary()
    summary.update(top)
    summary["jobs"][1].update(row)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        batch_dir = root / "batch-20261130T031500Z"
        write_record(batch_dir, "c1", "m", outcome="passed")
        (batch_dir / "batch-summary.json").write_text(as_json(summary))
        run_everything(root, batch_dir)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=st.dictionaries(st.sampled_from(RECORD_KEYS), HOSTILE_VALUES, min_size=1, max_size=3))
def test_no_command_crashes_on_a_record_with_wrong_types(fields: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        batch_dir = root / "batch-20261130T031500Z"
        write_record(batch_dir, "c1", "m", outcome="passed")
        record = {**make_meta("c2", "m", "failed", at=5), **fields}
        write_record(batch_dir, "c2", "m", at=5, raw=as_json(record))
        (batch_dir / "batch-summary.json").write_text(as_json(sound_summary()))
        run_everything(root, batch_dir)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    usages=st.lists(USAGES, min_size=4, max_size=4),
    durations=st.lists(HOSTILE_NUMBERS, min_size=2, max_size=2),
)
def test_no_command_crashes_on_usage_and_durations_past_any_bound(
    usages: list[Any], durations: list[Any]
) -> None:
    # In both rows and both records at once: what overflows is their sum.
    summary = sound_summary()
    for row, usage, duration in zip(summary["jobs"], usages, durations, strict=False):
        row.update(usage=usage, duration_seconds=duration)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        batch_dir = root / "batch-20261130T031500Z"
        for at, (case, outcome) in enumerate((("c1", "passed"), ("c2", "failed"))):
            record = {
                **make_meta(case, "m", outcome, at=at),
                "duration_seconds": durations[at],
                "usage": usages[2 + at],
                "usage_total": usages[at],
            }
            write_record(batch_dir, case, "m", at=at, raw=as_json(record))
        (batch_dir / "batch-summary.json").write_text(as_json(summary))
        run_everything(root, batch_dir)


#: What a damaged or forged cache may hold: garbage, JSON of any shape, JSON that nests or
#: counts past any sense, the marshal bytes that once asked for 16 GiB (a list declaring
#: 2**31 items); as the database file itself, or as any value of its rows.
CACHE_BODIES = st.one_of(
    st.binary(max_size=300),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=20,
    ).map(lambda value: json.dumps(value).encode()),
    st.sampled_from(
        [
            b"[" * 100_000,
            b"[" * 50 + b"]" * 50,
            b"9" * 5000,
            b'{"m": [[], [], [], [], [], [], []]}',
            b"[\xff\xff\xff\x7f",
            b"\xdb\xff\xff\xff\x7f",
        ]
    ),
)
COLUMNS = ["run_dir", "ino", "size", "mtime_ns", "ctime_ns", "error", "fields"]


def could_be_a_records(column: str, value: bytes) -> bool:
    """Whether ``value`` in ``column`` is one some record could be cached with (then a
    forged row says what a forged record would: docs/ledger.md, *What the cache trusts*).
    Bytes are a BLOB, which SQLite never converts: only ``fields`` holds one, a JSON array
    of a value per field."""
    if column != "fields":
        return False
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return False
    return isinstance(decoded, list) and len(decoded) == len(ledger_cache.STORED_FIELDS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    whole_file=st.one_of(st.none(), CACHE_BODIES),
    forged=st.lists(st.tuples(st.sampled_from(COLUMNS), CACHE_BODIES), max_size=3),
)
def test_no_bytes_in_the_ledger_cache_change_what_is_read_or_crash_a_command(
    whole_file: bytes | None, forged: list[tuple[str, bytes]]
) -> None:
    assume(not any(could_be_a_records(column, value) for column, value in forged))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        batch_dir = root / "batch-20261130T031500Z"
        write_record(batch_dir, "c1", "m", outcome="passed")
        write_record(batch_dir, "c2", "m", outcome="failed", at=5)
        (batch_dir / "batch-summary.json").write_text(as_json(sound_summary()))
        expected = results.load_recorded_runs(batch_dir, use_index=False)
        # Records count as aged at once: every one is cached, its signature right.
        with mock.patch.object(ledger_scan, "RACY_WINDOW_NS", -(10**15)):
            results.load_recorded_runs(batch_dir)
        path = ledger_cache.cache_path(batch_dir)
        assert path is not None
        if whole_file is not None:
            path.write_bytes(whole_file)
        else:
            with sqlite3.connect(path) as db:
                for column, value in forged:
                    # A value the table refuses (a null key, two rows of one key) is none.
                    with contextlib.suppress(sqlite3.IntegrityError):
                        db.execute(f'UPDATE records SET "{column}" = ?', (value,))
        read = results.load_recorded_runs(batch_dir)
        assert (dict(read), read.unreadable, read.incomplete) == (
            dict(expected),
            expected.unreadable,
            expected.incomplete,
        )
        run_everything(root, batch_dir)
