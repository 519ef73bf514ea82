"""A JSONL dataset as the sweep's cases (batch.sweep.dataset), read from real temp files."""

from __future__ import annotations

import gzip
import json
import pickle
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from batch.errors import SweepError
from batch.plan.matrix import build_jobs
from batch.sweep.dataset import load_dataset
from batch.sweep.load import load_sweep


def write(tmp_path: Path, content: bytes | str, name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def error(path: Path, id_field: str = "task_id") -> str:
    with pytest.raises(SweepError) as caught:
        load_dataset(path, id_field, "data.jsonl")
    message = str(caught.value)
    assert "\n" not in message
    return message


ROWS = (
    '{"task_id": "HumanEval/0", "prompt": "def f():", "n": 3, "t": 0.5, "ok": true,'
    ' "tags": ["a"], "meta": {"k": 1}, "none": null}\n'
    "\n"
    '{"task_id": 7, "prompt": "x"}\n'
)


def test_rows_become_cases_with_scalar_params_and_the_row_kept(tmp_path: Path) -> None:
    dataset = load_dataset(write(tmp_path, ROWS), "task_id", "data.jsonl")
    first, second = dataset.cases
    assert (first.id, first.line) == ("HumanEval/0", 1)
    assert first.params == {
        "task_id": "HumanEval/0",
        "prompt": "def f():",
        "n": 3,
        "t": 0.5,
        "ok": True,
    }
    assert json.loads(first.row)["meta"] == {"k": 1}  # non-scalars kept in the row
    assert first.row == ROWS.splitlines()[0].encode()
    assert (second.id, second.line) == ("7", 3)  # an integer id as its JSON text


def reference_params(line: str) -> dict[str, Any]:
    """What a row's params are, straight from the rule: its string, number and boolean
    fields with a non-empty name, in the row's order (a repeated key: its last value)."""
    return {
        key: value
        for key, value in json.loads(line).items()
        if isinstance(value, str | int | float) and key  # bool is an int
    }


def test_each_rows_params_follow_its_own_fields_whatever_the_rows_before_it(
    tmp_path: Path,
) -> None:
    # Rows with the same keys whose values differ in type, an empty key, repeated keys.
    lines = [
        '{"id": "a", "x": "s", "y": 1}',
        '{"id": "b", "x": [1], "y": 2}',
        '{"id": "c", "x": "t", "y": null}',
        '{"id": "d", "x": "u", "y": 3.5}',
        '{"id": "e", "x": {"k": 1}, "y": true}',
        '{"id": "f", "": 1, "x": "v"}',
        '{"id": "g", "x": 1, "x": [2]}',
        '{"id": "h", "x": [1], "x": "w", "z": "\\u00e9\\n"}',
        '{"id": "i", "x": "s", "y": 1}',
    ]
    dataset = load_dataset(write(tmp_path, "\n".join(lines)), "id", "data.jsonl")
    assert len(dataset.params) == len(lines)
    for params, line in zip(dataset.params, lines, strict=True):
        want = reference_params(line)
        assert list(params.items()) == list(want.items()), line
        assert dict(params) == want and params == want and len(params) == len(want)
        assert "x" in params if "x" in want else "x" not in params
        assert "nope" not in params
        with pytest.raises(KeyError):
            params["nope"]
        if "x" not in want:
            with pytest.raises(KeyError):
                params["x"]  # a list or object is in the row, not a param


def test_rows_whose_params_all_differ_keep_their_own(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": f"r{i}", f"k{i}": i, "shared": "v" if i % 2 else [i]})
        for i in range(2000)
    ]
    dataset = load_dataset(write(tmp_path, "\n".join(lines)), "id", "data.jsonl")
    for params, line in zip(dataset.params, lines, strict=True):
        assert list(params.items()) == list(reference_params(line).items())


def test_reading_a_rows_params_keeps_none_of_its_lists(tmp_path: Path) -> None:
    # A job's params are decoded from its row as it starts, and kept for the next few reads
    # of them; the row's lists and objects (a row may be 16 MiB) are not kept with them.
    # This test's own row (its temp dir in it): no read before this one has decoded it.
    row = json.dumps({"id": "big", "n": 1, "at": str(tmp_path), "rows": [[0, 0, 0]] * 100_000})
    dataset = load_dataset(write(tmp_path, row), "id", "data.jsonl")
    (params,) = dataset.params
    tracemalloc.start()
    try:
        assert params["n"] == 1
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak > 5_000_000  # the whole row was decoded (100,000 lists) ...
    assert kept < 100_000  # ... and none of it kept


def test_a_dataset_jobs_params_survive_pickling(tmp_path: Path) -> None:
    # A Dask worker gets its job pickled (batch.executors.dask_worker.WorkerCall).
    (tmp_path / "data.jsonl").write_text('{"task_id": "t1", "n": 2, "l": [1]}\n')
    (tmp_path / "sweep.yaml").write_text(
        "cases: {jsonl: data.jsonl, id: task_id}\nmodels: [m]\ncommand: [echo, '{params.n}']\n"
    )
    (job,) = build_jobs(load_sweep(tmp_path / "sweep.yaml"))
    again = pickle.loads(pickle.dumps(job))
    assert again == job
    assert dict(again.params) == {"task_id": "t1", "n": 2}
    assert again.case_row == b'{"task_id": "t1", "n": 2, "l": [1]}'


def test_gzip_by_magic_bytes_or_suffix_gives_the_same_cases(tmp_path: Path) -> None:
    plain = load_dataset(write(tmp_path, ROWS), "task_id", "data.jsonl")
    packed = gzip.compress(ROWS.encode())
    for name in ("data.jsonl.gz", "data.bin"):
        dataset = load_dataset(write(tmp_path, packed, name), "task_id", name)
        assert dataset.cases == plain.cases
        assert dataset.fingerprint == plain.fingerprint  # the content, not its packing


def test_a_multi_member_gzip_file_is_read_whole(tmp_path: Path) -> None:
    # `cat a.gz b.gz` is a valid gzip file, and gzip allows zero padding after a member.
    first, rest = ROWS.split("\n", 1)
    packed = gzip.compress(f"{first}\n".encode()) + b"\0\0" + gzip.compress(rest.encode())
    dataset = load_dataset(write(tmp_path, packed, "data.jsonl.gz"), "task_id", "data.jsonl")
    assert dataset.cases == load_dataset(write(tmp_path, ROWS), "task_id", "data.jsonl").cases


def test_fingerprint_follows_content_and_id_field(tmp_path: Path) -> None:
    path = write(tmp_path, ROWS)
    before = load_dataset(path, "task_id", "data.jsonl")
    assert load_dataset(path, "task_id", "data.jsonl").fingerprint == before.fingerprint
    assert load_dataset(path, "prompt", "data.jsonl").fingerprint != before.fingerprint
    write(tmp_path, ROWS.replace('"x"', '"y"'))
    assert load_dataset(path, "task_id", "data.jsonl").fingerprint != before.fingerprint
    assert before.snapshot("data.jsonl") == {
        "jsonl": "data.jsonl",
        "id": "task_id",
        "rows": 2,
        "fingerprint": before.fingerprint,
    }


def test_crlf_and_a_bom_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, b'\xef\xbb\xbf{"task_id": "a"}\r\n{"task_id": "b"}\r\n')
    dataset = load_dataset(path, "task_id", "data.jsonl")
    assert [case.id for case in dataset.cases] == ["a", "b"]
    assert dataset.cases[1].row == b'{"task_id": "b"}'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"task_id": "a"}\n{"task_id": "b",}\n', "data.jsonl:2:1: not a JSON value: "),
        (
            '{"task_id": "a"}\n[1, 2]\n',
            "data.jsonl:2:1: each line must be a JSON object, got a list",
        ),
        ('{"task_id": NaN}\n', "data.jsonl:1:1: not a JSON value: NaN is not a JSON number"),
        ('{"id": "a"}\n', "data.jsonl:1:1: task_id: missing (every row needs its case id)"),
        (
            '{"task_id": "a"}\n{"task_id": ["a"]}\n',
            "data.jsonl:2:1: task_id: the case id must be a string or integer, got a list",
        ),
        (
            '{"task_id": 1.5}\n',
            "data.jsonl:1:1: task_id: the case id must be a string or integer, got a number",
        ),
        (
            '{"task_id": null}\n',
            "data.jsonl:1:1: task_id: the case id must be a string or integer, got null",
        ),
        ('{"task_id": ""}\n', "data.jsonl:1:1: task_id: the case id is empty"),
        (
            '{"task_id": "a\\nb"}\n',
            "data.jsonl:1:1: task_id: the case id contains a NUL or line break: 'a\\nb'",
        ),
        (
            '{"task_id": "a"}\n\n{"task_id": "b"}\n{"task_id": "a"}\n',
            "data.jsonl:4:1: task_id: duplicate case id 'a' (first at line 1); "
            "every (case, model) pair must be unique",
        ),
        (
            '{"task_id": 1}\n{"task_id": "1"}\n',
            "data.jsonl:2:1: task_id: duplicate case id '1' (first at line 1); "
            "every (case, model) pair must be unique",
        ),
        (
            '{"task_id": "\\ud800"}\n',
            "data.jsonl:1:1: task_id: not valid Unicode text (a lone surrogate)",
        ),
        (
            '{"task_id": "a", "meta": {"x": ["ok", "\\udfff"]}}\n',
            "data.jsonl:1:1: meta.x[1]: not valid Unicode text (a lone surrogate)",
        ),
        ("\n  \n", "data.jsonl: the dataset has no rows (a sweep needs at least one case)"),
        ('{"task_id": "a"}\n' + "[" * 100_000 + "\n", "data.jsonl:2:1: not a JSON value: "),
    ],
)
def test_bad_rows_are_located_errors(tmp_path: Path, content: str, message: str) -> None:
    assert error(write(tmp_path, content)).startswith(message)


def test_a_json_error_names_its_column(tmp_path: Path) -> None:
    message = error(write(tmp_path, '{"task_id": "a"}\n{"task_id": "b",}\n'))
    assert message == (
        "data.jsonl:2:1: not a JSON value: Expecting property name enclosed in double quotes "
        "at column 17"
    )


def test_invalid_utf8_is_located_with_its_byte(tmp_path: Path) -> None:
    path = write(tmp_path, b'{"task_id": "a"}\n{"task_id": "\xff"}\n')
    assert error(path) == "data.jsonl:2:1: not UTF-8 text (byte 0xff at column 14)"


def test_unreadable_or_broken_gzip_files_are_one_line_errors(tmp_path: Path) -> None:
    assert error(tmp_path / "missing.jsonl") == (
        "data.jsonl: cannot read the dataset: No such file or directory"
    )
    truncated = gzip.compress(ROWS.encode())[:-10]
    assert error(write(tmp_path, truncated, "t.jsonl.gz")).startswith(
        "data.jsonl: not a readable gzip file: "
    )
    assert error(write(tmp_path, ROWS, "plain.jsonl.gz")).startswith(
        "data.jsonl: not a readable gzip file: "
    )
    packed = bytearray(gzip.compress(ROWS.encode()))
    packed[-8] ^= 0xFF  # the CRC of the content
    assert error(write(tmp_path, bytes(packed), "crc.jsonl.gz")) == (
        "data.jsonl: not a readable gzip file: CRC check failed"
    )
    two_members = gzip.compress(ROWS.encode()) * 2
    assert error(write(tmp_path, two_members[:-10], "cut.jsonl.gz")).startswith(
        "data.jsonl: not a readable gzip file: "
    )


# --- through load_sweep: cases: {jsonl: ..., id: ...} -----------------------------------------


def load_sweep_error(tmp_path: Path, cases: str) -> str:
    from batch.sweep.load import load_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text(f"cases: {cases}\nmodels: [m]\ncommand: [echo, '{{params.prompt}}']\n")
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    return str(caught.value)


def test_a_sweep_names_its_dataset_relative_to_itself(tmp_path: Path) -> None:
    from batch.sweep.load import load_sweep

    (tmp_path / "exp").mkdir()
    write(tmp_path / "exp", gzip.compress(ROWS.encode()), "data.jsonl.gz")
    path = tmp_path / "exp" / "sweep.yaml"
    path.write_text("cases: {jsonl: data.jsonl.gz, id: task_id}\nmodels: [m]\ncommand: [x]\n")
    sweep = load_sweep(path)
    assert [case.id for case in sweep.cases] == ["HumanEval/0", "7"]
    assert sweep.cases[1].row == b'{"task_id": 7, "prompt": "x"}'
    assert sweep.dataset is not None
    assert (sweep.dataset.path, sweep.dataset.rows) == (tmp_path / "exp" / "data.jsonl.gz", 2)


def test_dataset_key_errors_are_located_in_the_sweep_file(tmp_path: Path) -> None:
    assert load_sweep_error(tmp_path, "{jsonl: data.jsonl}").endswith(
        "sweep.yaml:1:8: cases: missing required key 'id'"
    )
    assert load_sweep_error(tmp_path, "{jsonl: gone.jsonl, id: task_id}").endswith(
        "gone.jsonl: cannot read the dataset: No such file or directory"
    )
    write(tmp_path, '{"task_id": "a"}\n')
    assert load_sweep_error(tmp_path, "{jsonl: data.jsonl, id: task_id}").endswith(
        "sweep.yaml:3:17: command[1]: {params.prompt} is not set for case 'a' "
        "(every case needs params: {prompt: ...})"
    )
