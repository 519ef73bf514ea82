"""Adaptive concurrency through the real CLI, against a rate-limited mock API on 127.0.0.1.

Each job calls the API (``tests/helpers/mock_api.py``) and reports ``api_or_credit`` on a
``429``. With ``adaptive: true`` the model's limit halves on the first rate-limited finish,
the driver never runs more of its jobs than the current limit, the rate-limited attempts are
retried in-run, and every change is an event and a display line. (The comparison with a
static limit, which takes minutes, is ``bench/adaptive.py``.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.mock_api import serve

if TYPE_CHECKING:
    from conftest import BatchCli

MOCK_API = Path(__file__).resolve().parent.parent / "helpers" / "mock_api.py"


def write_api_sweep(cli: BatchCli, url: str, cases: int, **model: Any) -> Path:
    sweep = {
        "output": "runs",
        "cases": [f"c{n}" for n in range(cases)],
        # Off: five 429s in a row (a slow start lets the bucket run dry) would open the
        # breaker, and a first eight all refused would halt the setup; neither is tested here.
        "models": [{"id": "m", "max_concurrent": 4, "breaker": "off", **model}],
        "halt": "off",
        "retries": 10,
        "max_attempts": 11,
        "retry_backoff": "0.1s",
        "command": [sys.executable, str(MOCK_API), "call", url],
    }
    path = cli.dir / "sweep.yaml"
    path.write_text(json.dumps(sweep))
    return path


def events(batch_dir: Path) -> list[dict[str, Any]]:
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_rate_limit_halves_an_adaptive_models_concurrency_and_the_jobs_still_pass(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    # Two tokens a second, one saved up: four jobs calling at once get at least one 429.
    with serve(rate=2, burst=1) as api:
        sweep = write_api_sweep(cli, api.url, 6, adaptive=True)
        result = cli.run(sweep, "--no-progress")
        refused = api.stats()["limited"]

    assert result.returncode == 0, result.stdout + result.stderr
    assert set(cli.statuses().values()) == {"passed"}
    log = events(cli.only_batch_dir())
    changes = [e for e in log if e["event"] == "concurrency"]
    assert changes[0] == {
        "t": changes[0]["t"],
        "event": "concurrency",
        "model": "m",
        "current": 2,
        "max": 4,
        "old": 4,
        "reason": "api_or_credit: halved",
    }
    limited = [
        e for e in log if e["event"] == "finish" and e["failure_category"] == "api_or_credit"
    ]
    assert refused == len(limited) > 0
    assert sum(e["event"] == "retry" for e in log) == len(limited)
    assert "LIMIT m: 4/4 at once" in result.stdout
    assert "LIMIT m: 2/4 at once" in result.stdout
    # The driver never ran more of the model's jobs than its limit at the time.
    limit, running = 4, 0
    for event in log:
        if event["event"] == "concurrency":
            limit = event["current"]
        elif event["event"] == "start":
            running += 1
            assert running <= limit, event
        elif event["event"] == "finish":
            running -= 1
