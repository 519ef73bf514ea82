"""A command named without a slash is looked up in its job's PATH once per invocation
(``batch.processes.programs.ProgramCache``), and runs exactly what a search by every spawn
would run: per PATH, with ``argv[0]`` as written, and searched again when the file found
will not start. Real scripts in real directories, spawned for real."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from batch.processes.programs import ProgramCache
from batch.processes.registry import ProcessRegistry
from batch.processes.spawn import SpawnError, spawn


def _tool(directory: Path, says: str, *, name: str = "tool", then: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\necho {says}\n{then}")
    path.chmod(0o755)
    return path


def _run_all(tmp_path: Path, commands: list[tuple[list[str], dict[str, str]]]) -> list[str]:
    """Spawn each (argv, env) one after the other with one registry; each one's log text."""
    logs = []

    async def scenario() -> None:
        registry = ProcessRegistry(None, watchdog=False)
        for n, (argv, env) in enumerate(commands):
            log = tmp_path / f"output-{n}.log"
            logs.append(log)
            try:
                process = await spawn(argv, cwd=tmp_path, env=env, log_path=log, registry=registry)
            except SpawnError:
                continue
            await process.wait()
        registry.close()

    asyncio.run(scenario())
    return [log.read_text() for log in logs]


def test_each_job_runs_the_program_its_own_path_names(tmp_path: Path) -> None:
    _tool(tmp_path / "a", "from-a")
    _tool(tmp_path / "b", "from-b")
    a_first = {"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}:/usr/bin:/bin"}
    b_first = {"PATH": f"{tmp_path / 'b'}:{tmp_path / 'a'}:/usr/bin:/bin"}
    logs = _run_all(tmp_path, [(["tool"], a_first), (["tool"], b_first), (["tool"], a_first)])
    assert logs == ["from-a\n", "from-b\n", "from-a\n"]


def test_a_program_removed_during_the_invocation_is_searched_for_again(tmp_path: Path) -> None:
    # The first one found deletes itself: the next spawn runs the next one in PATH, as a
    # search by that spawn would, and once none is left the job cannot start, as before.
    _tool(tmp_path / "a", "from-a", then='rm -- "$0"\n')
    _tool(tmp_path / "b", "from-b", then='rm -- "$0"\n')
    env = {"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}:/usr/bin:/bin"}
    logs = _run_all(tmp_path, [(["tool"], env)] * 3)
    assert logs[:2] == ["from-a\n", "from-b\n"]
    assert "cannot start 'tool'" in logs[2]
    assert "No such file or directory" in logs[2]


def test_the_job_sees_its_command_name_as_written(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    assert _run_all(tmp_path, [(["sh", "-c", 'echo "$0"'], env)]) == ["sh\n"]


@pytest.mark.parametrize(
    ("name", "path", "found"),
    [
        ("tool", "{a}:{b}", "{a}/tool"),
        ("tool", "{b}:{a}", "{b}/tool"),
        ("tool", "{empty}:{a}", "{a}/tool"),
        # A relative directory before it: the job's cwd decides, so the spawn searches.
        ("tool", "rel:{a}", None),
        ("tool", ":{a}", None),
        ("tool", "{a}:rel", "{a}/tool"),
        # A name with a slash is not searched for at all.
        ("./tool", "{a}", None),
        ("missing", "{a}:{b}", None),
    ],
)
def test_the_program_found_is_the_first_executable_file_in_path(
    tmp_path: Path, name: str, path: str, found: str | None
) -> None:
    dirs = {"a": tmp_path / "a", "b": tmp_path / "b", "empty": tmp_path / "empty"}
    _tool(dirs["a"], "a")
    _tool(dirs["b"], "b")
    dirs["empty"].mkdir()
    # Not programs a search would run: a directory and a file without the execute bit.
    (dirs["empty"] / "tool").mkdir()
    env = {"PATH": path.format(**dirs)}
    expected = None if found is None else found.format(**dirs)
    assert ProgramCache().find(name, env) == expected


def test_a_file_that_is_not_executable_is_passed_over(tmp_path: Path) -> None:
    plain = tmp_path / "a" / "tool"
    plain.parent.mkdir()
    plain.write_text("#!/bin/sh\necho no\n")
    _tool(tmp_path / "b", "from-b")
    env = {"PATH": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    assert ProgramCache().find("tool", env) == str(tmp_path / "b" / "tool")
