"""Shared fixture for the end-to-end CLI tests: the real ``batch`` command in a tmp dir.

``batch_cli`` runs ``python -m batch.cli`` as a real subprocess (signals and exit statuses
are real), writes sweep files whose jobs are the fake agent (``tests/helpers/fake_agent.py``), and
reads back what the driver left: batch dirs, the summary, run records, the runs counted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers.fake_jobs import fake_agent_command, wait_until
from helpers.terminal import TerminalDriver

from run_support import ledger_scan

#: Per-case actions are passed through this many ``{params.aN}`` argv slots.
ACTION_SLOTS = 6
#: A slot a case leaves empty holds this, which the fake agent ignores.
NO_ACTION = "-"


class Driver:
    """A ``batch`` process started in its own session, its output kept in files."""

    def __init__(self, process: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.process = process
        self.pid = process.pid
        self._out, self._err = out, err

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout)

    @property
    def stdout(self) -> str:
        return self._out.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self._err.read_text(errors="replace")


class BatchCli:
    """The ``batch`` command line and the files around it, under one tmp dir."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.count_file = directory / "count.txt"
        self._drivers: list[Driver | TerminalDriver] = []

    # --- sweeps -----------------------------------------------------------------------------

    def write_sweep(
        self,
        cases: Mapping[str, Sequence[str]] | Sequence[str],
        *,
        file: str = "sweep.yaml",
        before: Sequence[str] = (),
        after: Sequence[str] = ("pass",),
        **keys: Any,
    ) -> Path:
        """Write a sweep whose job is the fake agent and return its path.

        ``cases`` maps each case id to its own actions (at most :data:`ACTION_SLOTS`), or
        lists ids that all get none. Every job runs ``count=<count_file>``, then
        ``before``, its case's actions, then ``after``. Other keys (``models``,
        ``max_concurrent``...) go into the file as given; ``output`` defaults to ``runs``.
        """
        per_case = cases if isinstance(cases, Mapping) else {case: () for case in cases}
        slots = [f"{{params.a{n}}}" for n in range(ACTION_SLOTS)]
        command = fake_agent_command(f"count={self.count_file}", *before, *slots, *after)
        sweep = {
            "output": "runs",
            "cases": [{"id": case, "params": _slots(acts)} for case, acts in per_case.items()],
            "models": ["m"],
            "command": command,
            **keys,
        }
        path = self.dir / file
        # JSON is YAML, and it quotes any awkward name for us.
        path.write_text(json.dumps(sweep, ensure_ascii=False, indent=1), encoding="utf-8")
        return path

    # --- the command ------------------------------------------------------------------------

    def run(
        self, *args: str | Path, timeout: float = 60.0, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``batch ARGS`` to the end in this dir."""
        return subprocess.run(
            _argv(args),
            cwd=self.dir,
            env=_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *args: str | Path, env: Mapping[str, str] | None = None) -> Driver:
        """Start ``batch ARGS`` in its own session; the test signals and waits for it."""
        n = len(self._drivers)
        out, err = self.dir / f"driver-{n}.out", self.dir / f"driver-{n}.err"
        with open(out, "wb") as out_file, open(err, "wb") as err_file:
            process = subprocess.Popen(
                _argv(args),
                cwd=self.dir,
                env=_env(env),
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=err_file,
                start_new_session=True,
            )
        driver = Driver(process, out, err)
        self._drivers.append(driver)
        return driver

    def start_on_terminal(
        self, *args: str | Path, columns: int = 100, lines: int = 30
    ) -> TerminalDriver:
        """Start ``batch ARGS`` on a terminal window of ``columns`` by ``lines`` (a pty)."""
        driver = TerminalDriver(
            _argv(args), cwd=self.dir, env=_env(None), columns=columns, lines=lines
        )
        self._drivers.append(driver)
        return driver

    def stop_all(self) -> None:
        """Kill drivers a failed test left running (the watchdog then stops their jobs)."""
        for driver in self._drivers:
            if driver.process.poll() is None:
                driver.signal(signal.SIGKILL)
                driver.process.wait()

    # --- what the driver left ---------------------------------------------------------------

    def batch_dirs(self) -> list[Path]:
        runs = self.dir / "runs"
        return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []

    def only_batch_dir(self) -> Path:
        found = self.batch_dirs()
        assert len(found) == 1, found
        return found[0]

    def summary(self, batch_dir: Path | None = None) -> dict[str, Any]:
        path = (batch_dir or self.only_batch_dir()) / "batch-summary.json"
        return json.loads(path.read_text())

    def statuses(self, batch_dir: Path | None = None) -> dict[str, str]:
        """case (or "case|model" with more than one model) -> status, from the summary."""
        rows = self.summary(batch_dir)["jobs"]
        models = {row["model"] for row in rows}
        key = (lambda r: r["case"]) if len(models) == 1 else (lambda r: f"{r['case']}|{r['model']}")
        return {key(row): row["status"] for row in rows}

    def runs_counted(self) -> list[str]:
        """Case of every job run so far (each appends a line when it starts), then clear."""
        if not self.count_file.exists():
            return []
        lines = self.count_file.read_text(encoding="utf-8").splitlines()
        self.count_file.unlink()
        return sorted(line.split("\t")[0] for line in lines)

    def records(self, batch_dir: Path | None = None) -> list[dict[str, Any]]:
        """Every ``run-meta.json`` of the batch dir."""
        base = batch_dir or self.only_batch_dir()
        return [json.loads(p.read_text()) for p in sorted(base.glob("*/*/run-meta.json"))]

    def wait_for(self, *paths: Path, timeout: float = 30.0) -> None:
        if not wait_until(lambda: all(p.exists() for p in paths), timeout):
            missing = [str(p) for p in paths if not p.exists()]
            raise AssertionError(f"never appeared: {missing}")


def _slots(actions: Sequence[str]) -> dict[str, str]:
    if len(actions) > ACTION_SLOTS:
        raise ValueError(f"at most {ACTION_SLOTS} actions per case")
    padded = [*actions, *[NO_ACTION] * (ACTION_SLOTS - len(actions))]
    return {f"a{n}": action for n, action in enumerate(padded)}


def _argv(args: Sequence[str | Path]) -> list[str]:
    return [sys.executable, "-m", "batch.cli", *map(str, args)]


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    # The tree under test, wherever pytest was started from.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


#: The terminal size a worker of ``pytest -n`` must see as the run's own: its process is
#: started with COLUMNS=80 and LINES=24 whatever the run had, and tests of what fits the
#: terminal (``batch stats``, the live view) read them.
_TERMINAL_VARIABLES = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Hand each xdist worker the run's own terminal variables (set or not)."""
    node.workerinput["terminal_env"] = {name: os.environ.get(name) for name in _TERMINAL_VARIABLES}


def _restore_terminal_env(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    for name, value in workerinput.get("terminal_env", {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_configure(config: pytest.Config) -> None:
    _restore_terminal_env(config)
    _keep_bytecode(config)


def _keep_bytecode(config: pytest.Config) -> None:
    """Keep the bytecode this run compiles, in pytest's cache, when the environment says
    not to write it (this machine sets ``PYTHONDONTWRITEBYTECODE=1``).

    Without it every ``batch`` the suite starts (hundreds, and their watchdogs) compiles all
    of ``batch`` again, ~0.2 s of CPU each, and pytest rewrites and compiles every test
    module again at each run. As the bench does (``bench/overhead.py``), the bytecode goes
    under a ``PYTHONPYCACHEPREFIX``, here ``.pytest_cache`` (``--cache-clear`` empties it):
    nothing lands in the source tree.
    """
    cache = getattr(config, "cache", None)
    if not sys.dont_write_bytecode or cache is None:
        return
    try:
        prefix = str(cache.mkdir("pycache"))
    except OSError:  # a cache dir pytest cannot write either: compile as the environment says
        return
    sys.pycache_prefix, sys.dont_write_bytecode = prefix, False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix


@pytest.fixture
def batch_cli(tmp_path: Path) -> Iterator[BatchCli]:
    cli = BatchCli(tmp_path)
    yield cli
    cli.stop_all()


@pytest.fixture
def no_children_left() -> Callable[[], bool]:
    """Whether every child process started since the test began is gone, reaped too (a
    zombie still counts). Children other tests left running (a Dask cluster's) are not
    this test's."""
    before = {child.pid for child in psutil.Process().children()}
    return lambda: {child.pid for child in psutil.Process().children()} <= before


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every record a ledger reader parses from its file (not served by the
    ledger's cache), in order."""
    seen: list[str] = []
    real = ledger_scan.read_record

    def counting(path: str) -> tuple[Any, str | None]:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(ledger_scan, "read_record", counting)
    return seen


@pytest.fixture(autouse=True, scope="session")
def _own_ledger_caches(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The ledger's caches (``run_support.ledger_cache``: under ``$XDG_CACHE_HOME``) in this
    session's temp dir, for every ``batch`` the suite starts too: none in the home dir."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


#: A session fixture that starts a system component → the xdist group its tests share, so
#: under ``pytest -n`` one worker starts it once instead of every worker its own.
_COMPONENT_GROUPS = {
    "local_slurm": "slurm",
    "local_podman": "podman",
    "sshfs_mount": "sshfs",
    "local_redis": "redis",
}
#: Modules that start a component of their own beside the shared one: with its group, so
#: two never race for the same default ports. And test_dask.py, whose module cluster (a
#: scheduler and two worker processes) one worker then starts once, not each worker its
#: own; a test of it that needs a shared component keeps that component's group.
_MODULE_GROUPS = {"test_slurm_ports.py": "slurm", "test_dask.py": "dask"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark a test with the group of the component it needs, as it is collected: before any
    ``pytest_collection_modifyitems``, where xdist reads the groups."""
    fixtures = getattr(item, "fixturenames", ())
    groups = [group for fixture, group in _COMPONENT_GROUPS.items() if fixture in fixtures]
    groups += [_MODULE_GROUPS[item.path.name]] if item.path.name in _MODULE_GROUPS else []
    if groups:
        item.add_marker(pytest.mark.xdist_group(groups[0]))
