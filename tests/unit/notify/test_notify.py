"""Notify commands (batch/notify.py): real subprocesses given the event, and kept in bounds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from batch.errors import SweepError
from batch.notify.commands import Notifier, NotifyResult, notify
from batch.notify.payload import ENV_VARS, event_payload
from batch.processes.registry import ProcessRegistry
from batch.sweep.features.notify import NotifySpec, notify_key
from batch.sweep.nodes import read_document
from batch.sweep.secrets import REDACTED, redactor

SECRET = "sk-live-0123456789abcdef"
SLEEPER = (sys.executable, "-c", "import time; time.sleep(60)")
REDACT = redactor([SECRET])

#: Writes what it was given (stdin, the BATCH_* variables, one inherited one) to argv[1].
RECORDER = """
import json, os, sys
given = {
    "stdin": sys.stdin.read(),
    "env": {k: v for k, v in os.environ.items() if k.startswith("BATCH_")},
    "inherited": os.environ.get("NOTIFY_TEST_INHERITED"),
}
with open(sys.argv[1], "w") as out:
    json.dump(given, out)
"""


@pytest.fixture
def recorder(tmp_path: Path) -> Path:
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    return script


def payload(tmp_path: Path, event: str = "end", **fields: Any) -> dict[str, Any]:
    return event_payload(
        event,
        batch_dir=tmp_path / "batch-1",
        state="complete",
        statuses=["passed", "passed", "failed", "error", "skipped"],
        message="batch-1 complete: 2 passed, 1 failed, 1 error, 1 skipped",
        stamp="2026-11-30T10:00:00Z",
        **fields,
    )


def run(spec: NotifySpec, given: dict[str, Any], log: Path, **kwargs: Any) -> list[NotifyResult]:
    env = {**os.environ, "NOTIFY_TEST_INHERITED": "kept"}
    return asyncio.run(
        notify(
            spec,
            given,
            base_env=env,
            cwd=Path(given["batch_dir"]).parent,
            log_path=log,
            redact=REDACT,
            **kwargs,
        )
    )


class TestDelivery:
    def test_a_command_gets_the_event_on_stdin_and_in_its_environment(
        self, tmp_path: Path, recorder: Path
    ) -> None:
        out = tmp_path / "given.json"
        spec = NotifySpec(((sys.executable, str(recorder), str(out)),))
        [result] = run(spec, payload(tmp_path, exit_status=1), tmp_path / "notify.log")
        assert result.ok, result
        given = json.loads(out.read_text())
        event = json.loads(given["stdin"])
        assert event["event"] == "end"
        assert event["state"] == "complete"
        assert event["jobs"] == 5
        assert event["counts"]["passed"] == 2 and event["counts"]["error"] == 1
        assert event["exit_status"] == 1
        assert event["batch_dir"] == str(tmp_path / "batch-1")
        env = given["env"]
        assert set(env) == set(ENV_VARS)
        assert env["BATCH_EVENT"] == "end"
        assert env["BATCH_STATE"] == "complete"
        assert env["BATCH_DIR"] == str(tmp_path / "batch-1")
        assert (env["BATCH_JOBS"], env["BATCH_PASSED"], env["BATCH_FAILED"]) == ("5", "2", "1")
        assert (env["BATCH_ERROR"], env["BATCH_SKIPPED"]) == ("1", "1")
        assert given["inherited"] == "kept"
        assert "--- ok: exit code 0" in (tmp_path / "notify.log").read_text()

    def test_every_command_runs(self, tmp_path: Path, recorder: Path) -> None:
        outs = [tmp_path / "a.json", tmp_path / "b.json"]
        spec = NotifySpec(tuple((sys.executable, str(recorder), str(o)) for o in outs))
        results = run(spec, payload(tmp_path), tmp_path / "notify.log")
        assert [r.ok for r in results] == [True, True]
        assert all(o.exists() for o in outs)

    def test_an_event_the_spec_does_not_listen_to_runs_nothing(
        self, tmp_path: Path, recorder: Path
    ) -> None:
        out = tmp_path / "given.json"
        spec = NotifySpec(((sys.executable, str(recorder), str(out)),), events=frozenset({"end"}))
        assert run(spec, payload(tmp_path, "stall"), tmp_path / "notify.log") == []
        assert not out.exists()


class TestSecrets:
    def test_a_secret_is_redacted_in_stdin_env_and_log(
        self, tmp_path: Path, recorder: Path
    ) -> None:
        out = tmp_path / "given.json"
        # The recorder also prints the secret (as a careless notifier might, e.g. an echoed
        # URL): the log must not keep it.
        script = tmp_path / "loud.py"
        script.write_text(RECORDER + f"\nprint('token', {SECRET!r})\n")
        spec = NotifySpec(((sys.executable, str(script), str(out)),))
        given = payload(tmp_path, "halt", reason=f"job said Authorization: Bearer {SECRET}")
        given["message"] = f"halted: {SECRET}"
        [result] = run(spec, given, tmp_path / "notify.log")
        assert result.ok, result
        received = out.read_text()
        assert SECRET not in received
        assert json.loads(json.loads(received)["stdin"])["reason"].endswith(REDACTED)
        assert json.loads(received)["env"]["BATCH_MESSAGE"] == f"halted: {REDACTED}"
        log = (tmp_path / "notify.log").read_text()
        assert SECRET not in log
        assert f"token {REDACTED}" in log


class TestFailures:
    def test_a_failing_command_is_logged_with_its_output(self, tmp_path: Path) -> None:
        argv = (sys.executable, "-c", "print('webhook said 500'); raise SystemExit(1)")
        [result] = run(NotifySpec((argv,)), payload(tmp_path), tmp_path / "notify.log")
        assert (result.ok, result.exit_code, result.reason) == (False, 1, "exit code 1")
        log = (tmp_path / "notify.log").read_text()
        assert "notify end:" in log
        assert "webhook said 500" in log
        assert "--- FAILED: exit code 1" in log

    def test_a_missing_program_is_logged_not_raised(self, tmp_path: Path) -> None:
        argv = (str(tmp_path / "no-such-notifier"),)
        [result] = run(NotifySpec((argv,)), payload(tmp_path), tmp_path / "notify.log")
        assert not result.ok and result.exit_code is None
        assert result.reason.startswith("cannot start")
        assert "--- FAILED: cannot start" in (tmp_path / "notify.log").read_text()

    def test_a_hanging_command_is_killed_with_its_group(self, tmp_path: Path) -> None:
        # It starts a child in its own group that would outlive a kill of the leader alone.
        pid_file = tmp_path / "child.pid"
        code = (
            "import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
            "print('connecting...', flush=True)\n"
            "time.sleep(60)\n"
        )
        spec = NotifySpec(((sys.executable, "-c", code),), timeout=0.5)
        started = time.monotonic()
        [result] = run(spec, payload(tmp_path), tmp_path / "notify.log", grace=0.2)
        assert time.monotonic() - started < 1.5
        assert not result.ok and result.reason.startswith("timed out after 0.5s")
        child = int(pid_file.read_text())
        assert not _alive(child)
        log = (tmp_path / "notify.log").read_text()
        assert "connecting..." in log and "--- FAILED: timed out" in log

    def test_an_empty_command_is_logged_not_raised(self, tmp_path: Path) -> None:
        [result] = run(NotifySpec(((),)), payload(tmp_path), tmp_path / "notify.log")
        assert (result.ok, result.reason) == (False, "the command is empty")

    def test_an_unwritable_log_does_not_stop_the_notifier(self, tmp_path: Path) -> None:
        argv = (sys.executable, "-c", "raise SystemExit(3)")
        log = tmp_path / "missing-dir" / "notify.log"
        [result] = run(NotifySpec((argv,)), payload(tmp_path), log)
        assert result.exit_code == 3


class TestNotifier:
    def test_fire_returns_at_once_and_drain_waits_for_delivery(
        self, tmp_path: Path, recorder: Path
    ) -> None:
        out = tmp_path / "given.json"
        seen: list[NotifyResult] = []

        async def driver() -> tuple[float, bool]:
            notifier = _notifier(tmp_path, ((sys.executable, str(recorder), str(out)),), seen)
            started = time.monotonic()
            notifier.fire(payload(tmp_path))
            fired_in = time.monotonic() - started
            return fired_in, await notifier.drain()

        fired_in, finished = asyncio.run(driver())
        assert fired_in < 0.05
        assert finished
        assert json.loads(json.loads(out.read_text())["stdin"])["event"] == "end"
        assert [r.ok for r in seen] == [True]

    def test_events_reach_a_receiver_in_the_order_they_happened(self, tmp_path: Path) -> None:
        # The first event's command is the slower one: fired side by side, it would log last.
        log = tmp_path / "received"
        script = (
            "import json, sys, time; event = json.load(sys.stdin)['event']; "
            "time.sleep(0.5 if event == 'halt' else 0); "
            f"open({str(log)!r}, 'a').write(event + '\\n')"
        )
        seen: list[NotifyResult] = []

        async def driver() -> bool:
            notifier = _notifier(tmp_path, ((sys.executable, "-c", script),), seen)
            notifier.fire(payload(tmp_path, "halt", reason="r", rule="threshold", mode="soon"))
            notifier.fire(payload(tmp_path, "end", exit_status=4))
            return await notifier.drain()

        assert asyncio.run(driver())
        assert log.read_text().splitlines() == ["halt", "end"]
        assert [r.event for r in seen] == ["halt", "end"]

    def test_the_end_event_behind_a_hung_notifier_still_gets_its_own_time(
        self, tmp_path: Path
    ) -> None:
        # The halt notifier ignores SIGTERM, so it holds the queue for its timeout and the
        # kill grace; the end notifier behind it then needs a little time of its own.
        log = tmp_path / "received"
        script = (
            "import json, signal, sys, time; event = json.load(sys.stdin)['event']\n"
            "if event == 'halt':\n"
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)\n"
            "time.sleep(0.2)\n"
            f"open({str(log)!r}, 'a').write(event + '\\n')\n"
        )
        seen: list[NotifyResult] = []

        async def driver() -> bool:
            # 2 s: time for a Python to start on a loaded machine (the suite runs in
            # parallel), where 0.5 s killed the end notifier before it wrote a line.
            notifier = _notifier(tmp_path, ((sys.executable, "-c", script),), seen, timeout=2.0)
            notifier.fire(payload(tmp_path, "halt", reason="r", rule="threshold", mode="soon"))
            notifier.fire(payload(tmp_path, "end", exit_status=4))
            return await notifier.drain()

        assert asyncio.run(driver())
        assert log.read_text().splitlines() == ["end"]
        assert [(r.event, r.ok) for r in seen] == [("halt", False), ("end", True)]
        assert "--- FAILED: timed out after 2.0s; killed" in (tmp_path / "notify.log").read_text()

    def test_drain_is_bounded_by_a_hanging_command(self, tmp_path: Path) -> None:
        seen: list[NotifyResult] = []
        pid_file = tmp_path / "pid"
        code = (
            "import os, time\n"
            f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
            "time.sleep(60)\n"
        )

        async def driver() -> bool:
            notifier = _notifier(tmp_path, ((sys.executable, "-c", code),), seen, timeout=30.0)
            notifier.fire(payload(tmp_path))
            for _ in range(200):  # started within 2 s
                if pid_file.exists() and pid_file.read_text():
                    break
                await asyncio.sleep(0.01)
            return await notifier.drain(0.3)

        started = time.monotonic()
        assert asyncio.run(driver()) is False
        assert time.monotonic() - started < 1.5
        assert not _alive(int(pid_file.read_text()))
        assert "--- FAILED: killed: the driver could not wait longer" in (
            (tmp_path / "notify.log").read_text()
        )
        assert [r.ok for r in seen] == []  # cancelled: no result to report

    def test_a_running_notifier_is_tracked_but_outlives_the_jobs_kill(self, tmp_path: Path) -> None:
        # Tracked like a job (pgids.json, the watchdog), so a driver that dies while it
        # notifies leaves no notifier behind; but a second Ctrl-C or halt now (kill_all)
        # does not stop it: it tells of them. The driver's bounded wait does.
        seen: list[NotifyResult] = []
        registry = ProcessRegistry(tmp_path, watchdog=False)

        async def driver() -> tuple[int, int, int]:
            notifier = _notifier(tmp_path, (SLEEPER,), seen, registry=registry)
            notifier.fire(payload(tmp_path))
            for _ in range(200):  # started within 2 s
                if len(registry):
                    break
                await asyncio.sleep(0.01)
            tracked = len(registry)
            await registry.kill_all(0.2)
            after_kill = len(registry)
            await notifier.drain(0.3)
            return tracked, after_kill, len(registry)

        assert asyncio.run(driver()) == (1, 1, 0)
        assert [(r.ok, r.reason) for r in seen] == []  # cancelled: logged, not reported
        log = (tmp_path / "notify.log").read_text()
        assert "killed: the driver could not wait longer" in log
        assert "killed by signal" not in log

    def test_what_a_notifier_leaves_outside_its_group_is_stopped_with_the_registry(
        self, tmp_path: Path
    ) -> None:
        # A notifier that double-forks a daemon into its own session escapes the group
        # kill; its job token is how the registry still finds and stops it.
        pid_file = tmp_path / "daemon.pid"
        daemon = (
            f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
        )
        escaper = (
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {daemon!r}], "
            "start_new_session=True)",
        )
        seen: list[NotifyResult] = []
        registry = ProcessRegistry(tmp_path, kill_grace=0.5, watchdog=False)

        async def driver() -> None:
            notifier = _notifier(tmp_path, (escaper,), seen, registry=registry)
            notifier.fire(payload(tmp_path))
            await notifier.drain(5.0)
            for _ in range(200):  # the daemon writes its pid within 2 s
                if pid_file.exists() and pid_file.read_text():
                    break
                await asyncio.sleep(0.01)

        asyncio.run(driver())
        pid = int(pid_file.read_text())
        try:
            registry.close()
            assert not _alive(pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert [r.ok for r in seen] == [True]

    def test_a_broken_result_callback_is_not_the_sweeps_problem(self, tmp_path: Path) -> None:
        def broken(result: NotifyResult) -> None:
            raise RuntimeError("bug in the display")

        async def driver() -> bool:
            notifier = Notifier(
                NotifySpec(((sys.executable, "-c", "pass"),)),
                base_env=os.environ,
                cwd=tmp_path,
                log_path=tmp_path / "notify.log",
                redact=REDACT,
                on_result=broken,
            )
            notifier.fire(payload(tmp_path))
            return await notifier.drain(5.0)

        assert asyncio.run(driver())


def _notifier(
    tmp_path: Path,
    commands: tuple[tuple[str, ...], ...],
    seen: list[NotifyResult],
    timeout: float = 5.0,
    registry: ProcessRegistry | None = None,
) -> Notifier:
    return Notifier(
        NotifySpec(commands, timeout=timeout),
        base_env=os.environ,
        cwd=tmp_path,
        log_path=tmp_path / "notify.log",
        redact=REDACT,
        on_result=seen.append,
        grace=0.2,
        registry=registry,
    )


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.02)
    return True


class TestNotifyKey:
    def spec(self, tmp_path: Path, text: str) -> NotifySpec | None:
        path = tmp_path / "sweep.yaml"
        path.write_text(text)
        return notify_key(next(v for _, v in read_document(path).entries()))

    def test_one_command(self, tmp_path: Path) -> None:
        assert self.spec(tmp_path, "notify: [notify-send, done]\n") == NotifySpec(
            (("notify-send", "done"),)
        )

    def test_several_commands_with_a_timeout_and_events(self, tmp_path: Path) -> None:
        spec = self.spec(
            tmp_path,
            "notify:\n  commands: [[a, '1'], [b]]\n  timeout: 5s\n  events: [end, stall]\n",
        )
        assert spec == NotifySpec((("a", "1"), ("b",)), 5.0, frozenset({"end", "stall"}))

    def test_null_is_off(self, tmp_path: Path) -> None:
        assert self.spec(tmp_path, "notify: null\n") is None

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("notify: notify-send done\n", "sweep.yaml:1:9: notify: must be a list of arguments"),
            (
                "notify:\n  commands: [a]\n  events: [ended]\n",
                "sweep.yaml:3:11: notify.events: unknown event 'ended'",
            ),
            ("notify: ['', x]\n", "sweep.yaml:1:9: notify[0]: the program is empty"),
            ("notify: {timeout: 5s}\n", "sweep.yaml:1:9: notify: missing"),
        ],
    )
    def test_bad_values_are_located(self, tmp_path: Path, text: str, message: str) -> None:
        with pytest.raises(SweepError) as caught:
            self.spec(tmp_path, text)
        assert f"{tmp_path}/{message}" in str(caught.value), str(caught.value)


class TestMessage:
    def message(self, tmp_path: Path, event: str, **fields: Any) -> str:
        given = event_payload(
            event,
            batch_dir=tmp_path / "nightly-1",
            state="running" if event in ("stall", "recovered") else "complete",
            statuses=["passed", "error", "running", "running"],
            stamp="2026-11-30T10:00:00Z",
            **fields,
        )
        return given["message"]

    def test_each_event_says_what_happened_and_the_counts(self, tmp_path: Path) -> None:
        counts = "1 passed, 1 error, 2 running"
        assert self.message(tmp_path, "end") == f"nightly-1 complete: {counts}"
        assert self.message(tmp_path, "halt", reason="budget reached") == (
            f"nightly-1 halted (budget reached): {counts}"
        )
        assert self.message(tmp_path, "interrupt") == (
            f"nightly-1 interrupted: starting no new jobs ({counts})"
        )
        assert self.message(tmp_path, "stall", stalled_seconds=1800.0) == (
            f"nightly-1: stalled, no job finished for 30m00s (2 running; {counts})"
        )
        assert self.message(tmp_path, "recovered") == (
            f"nightly-1: recovered, a job finished again ({counts})"
        )
