"""``batch view`` in a real browser: Debian's chromium, driven by Playwright, watching and
steering a running sweep. Installs chromium when it is missing (scripts/chromium-local)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers.fake_jobs import wait_until
from playwright.sync_api import Browser, Page, expect, sync_playwright

if TYPE_CHECKING:
    from conftest import BatchCli

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-view-test-4c1d2f"
#: Where the page's screenshot goes: docs/view.png is one, taken with
#: ``VIEW_SCREENSHOT=docs/view.png``; otherwise the test's own dir.
SCREENSHOT = os.environ.get("VIEW_SCREENSHOT")

#: Each job prints a line with the sweep's secret, waits while the test holds the gate
#: (the file "hold"), then takes 0.3 s; c3 fails (the model's failure).
JOB = r"""
import os, sys, time
case, model, here = sys.argv[1:4]
print(f"{case} x {model}: key {os.environ['API_TOKEN']}", flush=True)
hold = os.path.join(here, "hold")
for _ in range(3000):
    if not os.path.exists(hold):
        break
    time.sleep(0.02)
time.sleep(0.3)
sys.exit(1 if case == "c3" else 0)
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    found = subprocess.run(
        [str(ROOT / "scripts" / "chromium-local")], capture_output=True, text=True, check=True
    )
    path = found.stdout.strip().splitlines()[-1]
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True)
        yield launched
        launched.close()


class View:
    """A ``batch view`` process and its URL; stopped by its pid at the end."""

    def __init__(self, *args: str | Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "batch.cli", "view", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 20)
        assert ready, "batch view printed no URL"
        self.url = self.process.stdout.readline().decode().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.url
        self.base, self.token = self.url.split("/?token=")

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def post(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return error.code, json.loads(body)
            except ValueError:
                return error.code, body

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)


@pytest.fixture
def running_sweep(batch_cli: BatchCli) -> Iterator[tuple[BatchCli, Path, Any, View]]:
    cli = batch_cli
    (cli.dir / "job.py").write_text(JOB, encoding="utf-8")
    sweep = {
        "output": "runs",
        "cases": [f"c{n}" for n in range(1, 7)],
        "models": ["m/alpha", "m/beta"],
        "max_concurrent": 1,
        "env": {"API_TOKEN": SECRET},
        "command": [sys.executable, "-S", str(cli.dir / "job.py"), "{case}", "{model}",
                    str(cli.dir)],
    }  # fmt: skip
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep), encoding="utf-8")
    (cli.dir / "hold").touch()
    driver = cli.start(path, "--no-progress")
    assert wait_until(lambda: bool(cli.batch_dirs()), 10)
    batch_dir = cli.only_batch_dir()
    assert wait_until(lambda: (batch_dir / "batch-summary.json").exists(), 10)
    # The sweep file: its newest batch dir, and its secrets to redact.
    view = View(path)
    try:
        yield cli, batch_dir, driver, view
    finally:
        view.stop()


def starts(batch_dir: Path) -> int:
    events = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return sum(1 for line in events if json.loads(line)["event"] == "start")


def done_count(page: Page) -> int:
    text = page.locator(".progress").inner_text()
    return int(text.split(" of ")[0])


def test_the_page_follows_a_running_sweep_and_steers_it(
    browser: Browser, running_sweep: tuple[BatchCli, Path, Any, View]
) -> None:
    cli, batch_dir, driver, view = running_sweep
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(view.url)
    expect(page.locator("#live")).to_have_text("live", timeout=10_000)
    expect(page.locator(".progress")).to_contain_text("0 of 12 done")

    # Counts change as jobs finish, without a reload; the grid's cells are repainted where
    # they stand, not replaced, so a click that lands as a job finishes is not lost.
    first_cell = page.locator(".grid td.cell").first.element_handle()
    (cli.dir / "hold").unlink()
    page.wait_for_function(
        "() => Number(document.querySelector('.progress').textContent.split(' of ')[0]) >= 3",
        timeout=15_000,
    )
    page.wait_for_function("cell => cell.dataset.status === 'passed'", arg=first_cell)
    assert first_cell.evaluate("cell => cell.isConnected")
    # A job's page: its record and its log, the sweep's secret redacted.
    page.locator('.grid td.cell[data-status="passed"]').first.click()
    expect(page.locator("#job-log")).to_contain_text("[REDACTED]")
    assert SECRET not in page.locator("#job").inner_text()
    expect(page.locator("#job-record")).to_contain_text('"outcome": "passed"')
    page.locator("#job-close").click()

    # Pause: no job starts; continue: they start again.
    page.locator('button[data-action="pause"]').click()
    expect(page.locator(".badge.paused")).to_be_visible(timeout=5_000)
    before = starts(batch_dir)
    time.sleep(1.5)
    assert starts(batch_dir) == before  # the pause was taken before the badge showed
    # The next job waits from now: the sweep stays running (held only after the continue,
    # every job left could start and end before the hold, and the sweep end, on a slow
    # machine).
    (cli.dir / "hold").touch()
    page.locator('button[data-action="continue"]').click()
    expect(page.locator(".badge.paused")).to_have_count(0, timeout=5_000)
    assert wait_until(lambda: starts(batch_dir) > before, 10)

    # Skip a model: its jobs not started are skipped by hand.
    page.locator('button[data-action="skip"][data-model="m/beta"]').click()
    expect(page.locator('tr[data-model="m/beta"]')).to_contain_text("skipped by hand")
    # Set a model's limit: its Limit cell says it at once, not "—" until the next change.
    alpha = page.locator('tr[data-model="m/alpha"]')
    alpha.locator("input").fill("2")
    alpha.locator('button[data-action="concurrency"]').click()
    expect(alpha.locator("td").nth(10)).to_have_text("2 of 2", timeout=5_000)
    shot = Path(SCREENSHOT) if SCREENSHOT else cli.dir / "view.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    # Stop, as one Ctrl-C: the running job finishes, the sweep ends interrupted.
    page.locator('button[data-action="stop"]').click()
    expect(page.locator(".state")).to_have_text("stopping", timeout=5_000)
    (cli.dir / "hold").unlink()
    assert driver.process.wait(30) == 130
    summary = cli.summary(batch_dir)
    assert summary["state"] == "interrupted"
    beta = [row for row in summary["jobs"] if row["model"] == "m/beta"]
    assert any(row.get("skip_reason") == "skipped by hand (batch control)" for row in beta)
    expect(page.locator(".state")).to_have_text("interrupted", timeout=5_000)
    assert errors == []
    # A resume goes on as after Ctrl-C.
    resumed = cli.run(cli.dir / "sweep.yaml", "--resume", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr  # c3's failures are the model's
    assert cli.summary(batch_dir)["state"] == "complete"
    assert {row["status"] for row in cli.summary(batch_dir)["jobs"]} <= {"passed", "failed"}


def test_only_the_token_holder_gets_in_and_nothing_outside_the_batch_is_served(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(["c1", "c2"])
    assert cli.run(sweep, "--no-progress").returncode == 0
    batch_dir = cli.only_batch_dir()
    view = View(batch_dir)
    try:
        token = {"X-Batch-Token": view.token}
        assert view.get("/")[0] == 401
        assert view.get("/?token=wrong")[0] == 403
        assert view.get("/api/state?batch=0")[0] == 401
        assert view.get(f"/?token={view.token}")[0] == 200
        assert view.get("/api/state?batch=0", token)[0] == 200
        # DNS rebinding: a page of another name reaching this port.
        assert view.get(f"/?token={view.token}", {"Host": "evil.example"})[0] == 400
        # Traversal, plain and encoded, finds nothing to serve.
        for path in ("/static/../../../etc/passwd", "/static/..%2f..%2fetc%2fpasswd",
                     "/static/%2e%2e/sweep.yaml", "/../sweep.yaml"):  # fmt: skip
            status, body = view.get(path, token)
            assert status == 404 and b"root:" not in body, (path, status)
        assert view.get("/api/job?batch=0&case=../../etc&model=m", token)[0] == 404
        # A control needs the token in its header: the query alone is refused.
        status, _ = view.post(f"/api/control?batch=0&token={view.token}", {"action": "pause"}, {})
        assert status == 401
        status, said = view.post("/api/control?batch=0", {"action": "pause"}, token)
        assert (status, said["message"]) == (409, "no driver is running this batch")
        status, said = view.post("/api/control?batch=0", {"action": "launch"}, token)
        assert status == 400 and "unknown control" in said["error"]
        status, headers = _headers(view, f"/?token={view.token}")
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "unsafe-inline" not in headers["content-security-policy"]
        assert headers["referrer-policy"] == "no-referrer"
    finally:
        view.stop()
    read_only = View(batch_dir, "--read-only")
    try:
        token = {"X-Batch-Token": read_only.token}
        status, _ = read_only.post("/api/control?batch=0", {"action": "pause"}, token)
        assert status == 403
    finally:
        read_only.stop()


def _headers(view: View, path: str) -> tuple[int, dict[str, str]]:
    with urllib.request.urlopen(view.base + path, timeout=10) as response:
        return response.status, {k.lower(): v for k, v in response.headers.items()}


def test_two_batches_side_by_side(browser: Browser, batch_cli: BatchCli) -> None:
    cli = batch_cli
    sweep = cli.write_sweep({"c1": [], "c2": ["fail"]})
    assert cli.run(sweep, "--no-progress").returncode == 0
    assert cli.run(sweep, "--no-progress").returncode == 0
    first, second = cli.batch_dirs()
    view = View(first, second, "--read-only")
    try:
        page = browser.new_page()
        page.goto(view.url)
        expect(page.locator("section.batch")).to_have_count(2)
        for index, batch_dir in enumerate((first, second)):
            box = page.locator(f'section.batch[data-batch="{index}"]')
            expect(box.locator("h2")).to_have_text(batch_dir.name)
            expect(box.locator(".progress")).to_contain_text("2 of 2 done")
            expect(box.locator(".failures-box")).to_contain_text(
                "c2 \N{MULTIPLICATION SIGN} m: failed (model_failure)"
            )
        expect(page.locator("button")).to_have_count(1)  # read-only: only the job panel's close
        expect(page.locator(".note").first).to_have_text("read-only view: no controls")
    finally:
        view.stop()


def test_a_finished_batchs_page_offers_no_control_and_lists_only_jobs_that_did_not_pass(
    browser: Browser, batch_cli: BatchCli
) -> None:
    """A finished batch: no Pause/Continue/Stop/Skip/Set limit (no driver could take them)
    and the page says why; a job whose retry passed is not among the failures and its page
    is headed by its outcome alone; no Repeat column in a sweep without repeats."""
    cli = batch_cli
    (cli.dir / "flags").mkdir()
    sweep = cli.write_sweep(
        {"retried": [f"flaky={cli.dir}/flags/retried"], "c2": ["fail"], "c3": []},
        retries=1,
        retry_backoff="0s",
    )
    assert cli.run(sweep, "--no-progress").returncode == 0
    (batch_dir,) = cli.batch_dirs()
    view = View(batch_dir)
    try:
        page = browser.new_page()
        page.goto(view.url)
        expect(page.locator(".progress")).to_contain_text("3 of 3 done")
        expect(page.locator(".controls-off")).to_have_text(
            "this batch is complete: no driver is running it, so there is nothing to steer"
        )
        expect(page.locator("button[data-action]")).to_have_count(0)
        expect(page.locator(".model-controls")).to_have_count(0)
        failures = page.locator(".failures-box")
        expect(failures).to_contain_text("c2 \N{MULTIPLICATION SIGN} m: failed (model_failure)")
        expect(failures).not_to_contain_text("retried")
        expect(page.locator(".running-box th")).to_have_text(
            ["Running", "Model", "Step", "Elapsed", "Typical"]
        )
        page.locator("table.grid tr", has_text="retried").locator("td.cell").click()
        expect(page.locator("#job-status")).to_have_text(
            re.compile(r"^passed; attempt 2; run dir m/retried-m-\S+-a2$")
        )
    finally:
        view.stop()


#: One job, two attempts: each says which it is in its log, then waits while the test
#: holds its gate (``gate-N``); the first ends in error (exit 3) and is retried.
RETRIED = r"""
import os, sys, time
attempt = os.environ["BATCH_ATTEMPT"]
print(f"attempt {attempt} says hello", flush=True)
gate = os.path.join(sys.argv[1], f"gate-{attempt}")
for _ in range(3000):
    if not os.path.exists(gate):
        break
    time.sleep(0.02)
sys.exit(3 if attempt == "1" else 0)
"""


def test_a_running_jobs_page_shows_the_log_of_the_attempt_that_runs(
    browser: Browser, batch_cli: BatchCli
) -> None:
    cli = batch_cli
    (cli.dir / "job.py").write_text(RETRIED, encoding="utf-8")
    sweep = cli.dir / "sweep.yaml"
    sweep.write_text(json.dumps({
        "output": "runs", "cases": ["c1"], "models": ["m"], "retries": 1,
        "retry_backoff": "0s", "command": [sys.executable, "-S", str(cli.dir / "job.py"),
                                           str(cli.dir)],
    }), encoding="utf-8")  # fmt: skip
    for attempt in (1, 2):
        (cli.dir / f"gate-{attempt}").touch()
    driver = cli.start(sweep, "--no-progress")
    assert wait_until(lambda: bool(cli.batch_dirs()), 10)
    batch_dir = cli.only_batch_dir()
    events = batch_dir / "batch-logs" / "events.jsonl"
    assert wait_until(lambda: events.exists() and starts(batch_dir) == 1, 10)
    view = View(sweep)
    try:
        page = browser.new_page()
        page.goto(view.url)
        running = page.locator('.grid td.cell[data-status="running"]')
        expect(running).to_have_count(1, timeout=10_000)
        running.click()
        # Was: "not started yet", no log: the run dir came only with the attempt's end.
        expect(page.locator("#job-log")).to_contain_text("attempt 1 says hello", timeout=5_000)
        expect(page.locator("#job-status")).to_contain_text("attempt 1; run dir m/c1-m-")
        page.locator("#job-close").click()

        (cli.dir / "gate-1").unlink()  # attempt 1 ends in error; its retry starts
        assert wait_until(lambda: starts(batch_dir) == 2, 10)
        expect(running).to_have_count(1, timeout=10_000)
        running.click()
        # Was: the first attempt's log and record (outcome error) beside "attempt 2".
        expect(page.locator("#job-log")).to_contain_text("attempt 2 says hello", timeout=5_000)
        assert "attempt 1" not in page.locator("#job-log").inner_text()
        expect(page.locator("#job-status")).to_contain_text("attempt 2; run dir m/c1-m-")
        expect(page.locator("#job-record")).to_have_text("no record yet")
        (cli.dir / "gate-2").unlink()
        assert driver.wait() == 0, driver.stdout + driver.stderr
    finally:
        view.stop()


def test_a_batch_in_a_pool_shows_the_pools_limit_users_and_refusals(
    browser: Browser, batch_cli: BatchCli
) -> None:
    cli = batch_cli
    sweep = cli.write_sweep(
        ["c1", "c2"],
        name="pooled",
        models=[{"id": "m", "pool": "key"}],
        pools={"key": {"max_concurrent": 2, "rate": "20/s"}},
    )
    done = cli.run(sweep, "--no-progress", env={"XDG_STATE_HOME": str(cli.dir / "state")})
    assert done.returncode == 0, done.stdout + done.stderr
    (batch_dir,) = cli.batch_dirs()
    view = View(batch_dir)
    try:
        page = browser.new_page()
        page.goto(view.url)
        expect(page.locator(".progress")).to_contain_text("2 of 2 done")
        pools = page.locator("table.pools")
        expect(pools.locator("th")).to_have_text(
            ["Pool", "At once", "Rate", "Running", "Refused", "Sweeps"]
        )
        expect(pools.locator("tr[data-pool=key] td")).to_have_text(
            ["key", "2 of 2", "20/s of 20/s", re.compile(r"^[0-2]$"), "0", batch_dir.name]
        )
    finally:
        view.stop()
