"""Pools through the real CLI: sweeps started together share one provider key's limit.

The key is a rate-limited mock API on 127.0.0.1 (``tests/helpers/mock_api.py``: a token
bucket, ``429`` when it is empty); every job makes one request and reports
``api_or_credit`` on a ``429``. Each test has its own pool state dir (``XDG_STATE_HOME``)
or its own Redis keys, so tests in parallel never share a pool. The comparison with the
per-driver rule, and the timings, are ``bench/pools.py``.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers.fake_jobs import fake_agent_command, wait_until
from helpers.mock_api import serve

if TYPE_CHECKING:
    from conftest import BatchCli, Driver
    from helpers.redis_fixture import LocalRedis

pytest_plugins = ("helpers.redis_fixture",)

MOCK_API = Path(__file__).resolve().parent.parent / "helpers" / "mock_api.py"


def _env(cli: BatchCli) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(cli.dir / "state")}


def _events(batch_dir: Path) -> list[dict[str, Any]]:
    lines = (batch_dir / "batch-logs" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _batch_dir(cli: BatchCli, name: str) -> Path:
    (found,) = (cli.dir / "runs").glob(f"{name}-*")
    return found


def _api_sweep(cli: BatchCli, name: str, url: str, cases: int, pool: Mapping[str, Any]) -> Path:
    sweep = {
        "name": name,
        "output": "runs",
        "cases": [f"c{n:02d}" for n in range(cases)],
        "models": [{"id": "m", "pool": "key", "breaker": "off"}],
        "pools": {"key": dict(pool)},
        "max_concurrent": 4,
        "halt": "off",
        "retries": 3,
        "retry_backoff": "0.2s",
        "max_attempts": 4,
        "command": [sys.executable, str(MOCK_API), "call", url, "--caller", name],
    }
    path = cli.dir / f"{name}.yaml"
    path.write_text(json.dumps(sweep))
    return path


def test_three_sweeps_of_one_pool_share_the_key_without_storms_of_refusals(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    rate = 8.0
    names = ["alpha", "beta", "gamma"]
    with serve(rate=rate, burst=rate, latency=0.05) as api:
        # Room for each sweep's 4 at once: on a busy machine a job's process takes most of
        # a second to start, and it is the rate, not the slots, that is to bind.
        pool = {"max_concurrent": 12, "rate": f"{rate:g}/s", "adaptive": True}
        paths = [_api_sweep(cli, name, api.url, 24, pool) for name in names]
        drivers = [cli.start(path, "--no-progress", env=_env(cli)) for path in paths]
        codes = [driver.wait(120) for driver in drivers]
        stats = api.stats()

    assert codes == [0, 0, 0], [d.stdout + d.stderr for d in drivers]
    for name in names:
        summary = json.loads((_batch_dir(cli, name) / "batch-summary.json").read_text())
        assert summary["totals"]["error"] == 0
        assert summary["totals"]["passed"] == 24
    requests = stats["served"] + stats["limited"]
    assert stats["limited"] <= 0.10 * requests, stats
    # How much of the key's rate the pool uses is a timing, which bench/pools.py measures
    # (key use >= 90 %): on a loaded machine a job's process may take a second to start.
    # Fair shares: the starts of each sweep while all three were starting jobs.
    starts = {
        name: sorted(e["t"] for e in _events(_batch_dir(cli, name)) if e["event"] == "start")
        for name in names
    }
    since = max(times[0] for times in starts.values())
    until = min(times[-1] for times in starts.values())
    counts = {name: sum(since <= t <= until for t in times) for name, times in starts.items()}
    total = sum(counts.values())
    assert total >= 30, counts
    for name, count in counts.items():
        assert abs(count / total - 1 / 3) <= 0.1 / 3, (name, counts)


def _holding_sweep(cli: BatchCli, name: str, actions: list[str], store: str | None) -> Path:
    """A sweep of 2 jobs in a pool of 2 jobs at once: each job runs ``actions``."""
    keys: dict[str, Any] = {
        "name": name,
        "models": [{"id": "m", "pool": "key"}],
        "pools": {"key": {"max_concurrent": 2}},
        "max_concurrent": 2,
    }
    if store is not None:
        keys["pools_store"] = store
    return cli.write_sweep(["c0", "c1"], file=f"{name}.yaml", before=actions, **keys)


def _started(cli: BatchCli, name: str) -> int:
    found = list((cli.dir / "runs").glob(f"{name}-*"))
    if not found or not (found[0] / "batch-logs" / "events.jsonl").exists():
        return 0
    return sum(e["event"] == "start" for e in _events(found[0]))


def _kill_the_holder_and_see_the_other_start(cli: BatchCli, store: str | None) -> Driver:
    holder = cli.start(
        _holding_sweep(cli, "holder", ["sleep=60"], store), "--no-progress", env=_env(cli)
    )
    assert wait_until(lambda: _started(cli, "holder") == 2), holder.stdout + holder.stderr
    waiter = cli.start(_holding_sweep(cli, "waiter", [], store), "--no-progress", env=_env(cli))
    # The waiter has joined the pool (its first POOL line) and starts nothing: the holder's
    # two jobs fill it.
    assert wait_until(lambda: "POOL key:" in waiter.stdout), waiter.stdout + waiter.stderr
    assert _started(cli, "waiter") == 0
    assert waiter.process.poll() is None
    holder.signal(signal.SIGKILL)
    holder.wait()
    # The dead driver's slots are free: the waiter runs both its jobs and ends.
    assert waiter.wait(60) == 0, waiter.stdout + waiter.stderr
    assert set(cli.statuses(_batch_dir(cli, "waiter")).values()) == {"passed"}
    return waiter


def test_a_sigkilled_drivers_slots_go_to_the_other_sweep(batch_cli: BatchCli) -> None:
    _kill_the_holder_and_see_the_other_start(batch_cli, None)


def test_across_two_drivers_sharing_a_redis_store(
    batch_cli: BatchCli, local_redis: LocalRedis, request: pytest.FixtureRequest
) -> None:
    # A database of its own per test: the pool's key is the same name in every test.
    url = local_redis.url.rsplit("/", 1)[0] + f"/{abs(hash(request.node.nodeid)) % 15 + 1}"
    waiter = _kill_the_holder_and_see_the_other_start(batch_cli, url)
    assert "POOL key:" in waiter.stdout


def test_a_pool_store_that_cannot_be_reached_stops_the_sweep_before_it_starts(
    batch_cli: BatchCli,
) -> None:
    cli = batch_cli
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = _holding_sweep(cli, "lonely", [], f"redis://127.0.0.1:{port}/0")
    result = cli.run(path, "--no-progress", env=_env(cli))
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        f"error: {path}: pools_store redis://127.0.0.1:{port}/0: cannot reach it"
    ), line
    assert not (cli.dir / "runs").exists()
    assert cli.runs_counted() == []


def test_a_sweep_declaring_the_pool_differently_is_told_what_holds(batch_cli: BatchCli) -> None:
    cli = batch_cli
    strict = cli.write_sweep(
        ["c0"],
        file="strict.yaml",
        name="strict",
        before=["hold=" + str(cli.dir / "gate")],
        models=[{"id": "m", "pool": "key"}],
        pools={"key": {"max_concurrent": 1, "rate": "2/s"}},
    )
    (cli.dir / "gate").touch()
    first = cli.start(strict, "--no-progress", env=_env(cli))
    assert wait_until(lambda: _started(cli, "strict") == 1), first.stdout + first.stderr
    loose = cli.write_sweep(
        ["c0"],
        file="loose.yaml",
        name="loose",
        models=[{"id": "m", "pool": "key"}],
        pools={"key": {"max_concurrent": 4, "rate": "5/s"}},
        # batch check would first wait for RAM to settle (three polls 2 s apart, up to
        # 2 min while other work moves the RAM): not what this test is about. (One model,
        # one case: model-major runs the same jobs in the same order.)
        between_models={"settle": None},
        order="model-major",
    )
    # batch check reports the pool as the store holds it, and what would hold.
    checked = cli.run("check", loose, env=_env(cli))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (line,) = [line for line in checked.stdout.splitlines() if line.startswith("pool key:")]
    assert line.startswith("pool key: max_concurrent 4, rate 5/s (models m); in use by strict-")
    assert "1 at once, 2/s, 1 running, 0 refused" in line
    assert line.endswith("the strictest holds: max_concurrent 1, rate 2/s")
    second = cli.start(loose, "--no-progress", env=_env(cli))
    assert wait_until(lambda: "note: pool key" in second.stdout), second.stdout + second.stderr
    (cli.dir / "gate").unlink()
    assert first.wait(60) == 0 and second.wait(60) == 0, second.stdout + second.stderr
    note = next(line for line in second.stdout.splitlines() if "note: pool key" in line)
    assert "this sweep declares max_concurrent 4, rate 5/s" in note
    assert "max_concurrent 1, rate 2/s" in note
    assert "strict" in note
    # batch status shows the pool as the batch last saw it: limits, users, refusals. The
    # strict sweep ended first: then the loose sweep's own declaration held.
    status = cli.run("status", _batch_dir(cli, "loose"), "--format", "json")
    assert status.returncode == 0, status.stderr
    pool = json.loads(status.stdout)["pools"]["key"]
    assert (pool["concurrency"], pool["rate"], pool["refused"]) == (4, 5.0, 0)
    assert pool["sweeps"] == [_batch_dir(cli, "loose").name]
    text = cli.run("status", _batch_dir(cli, "loose")).stdout
    assert f"  key: 4 of 4 at once, 5/s of 5/s; 0 refused; sweeps: {pool['sweeps'][0]} " in text


def test_a_refusal_one_sweep_sees_lowers_the_pool_for_the_other(batch_cli: BatchCli) -> None:
    cli = batch_cli
    names = ["first", "second"]
    # No rate declared, 4 at once each: the key (3 a second, one saved up) refuses at once.
    with serve(rate=3, burst=1, latency=0.05) as api:
        pool = {"max_concurrent": 8, "adaptive": True}
        paths = [_api_sweep(cli, name, api.url, 10, pool) for name in names]
        for path in paths:  # retries enough for every job to pass in the end
            sweep = json.loads(path.read_text())
            path.write_text(json.dumps({**sweep, "retries": 20, "max_attempts": 21}))
        drivers = [cli.start(path, "--no-progress", env=_env(cli)) for path in paths]
        codes = [driver.wait(120) for driver in drivers]
    assert codes == [0, 0], [d.stdout + d.stderr for d in drivers]
    lowered = {
        name: [
            e
            for e in _events(_batch_dir(cli, name))
            if e["event"] == "pool" and e["action"] == "change" and "lowered" in e["reason"]
        ]
        for name in names
    }
    # A lowering is the pool's: a sweep records one the other's refusal made (which of the
    # two meets the refusals is the machine's timing, so not both ways are asserted).
    assert any(
        e["by"].startswith(f"{other}-")
        for name, other in (names, names[::-1])
        for e in lowered[name]
    ), lowered
    # The first lowering gave the pool a rate below what it was starting jobs at.
    first = min((e for changes in lowered.values() for e in changes), key=lambda e: e["t"])
    assert first["old_rate"] is None and first["rate"] is not None


@pytest.mark.parametrize(
    ("where", "pool_key", "expected"),
    [
        ("model", {"pool": "nope"}, "models[0].pool: no pool 'nope' in pools (declared: key)"),
        ("pools", {"rate": -2}, "pools.key.rate: must be a positive rate of starts"),
        ("pools", {"rate": ".inf"}, "pools.key.rate: must be a positive rate of starts"),
        ("pools", {"rate": "fast"}, "pools.key.rate: expected a positive rate of starts"),
    ],
)
def test_bad_pool_input_is_a_located_error(
    batch_cli: BatchCli, where: str, pool_key: dict[str, Any], expected: str
) -> None:
    cli = batch_cli
    pools: dict[str, Any] = {"key": {"max_concurrent": 2}}
    model: dict[str, Any] = {"id": "m", "pool": "key"}
    if where == "model":
        model.update(pool_key)
    else:
        pools["key"].update(pool_key)
    path = cli.dir / "sweep.yaml"
    rate = pools["key"].get("rate")
    rate_text = f"rate: {rate}, " if rate is not None else ""
    # YAML, not JSON: .inf is YAML's infinity.
    path.write_text(
        "cases: [c0]\n"
        f"models: [{{id: m, pool: {model['pool']}}}]\n"
        f"pools: {{key: {{{rate_text}max_concurrent: 2}}}}\n"
        f"command: {json.dumps(fake_agent_command('pass'))}\n"
    )
    result = cli.run(path, "--no-progress", env=_env(cli))
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{path.name}:") or line.startswith(str(path)), line
    assert expected in line
    assert not (cli.dir / "runs").exists()


def test_a_store_lost_mid_run_stops_the_starts_and_keeps_every_record(
    batch_cli: BatchCli,
) -> None:
    from helpers.redis_fixture import running_redis

    cli = batch_cli
    with running_redis() as (redis, server):
        path = cli.write_sweep(
            [f"c{n}" for n in range(6)],
            name="lost",
            before=["sleep=0.5"],
            models=[{"id": "m", "pool": "key"}],
            pools={"key": {"max_concurrent": 1}},
            pools_store=redis.url,
        )
        driver = cli.start(path, "--no-progress", env=_env(cli))
        done = cli.dir / "runs"
        assert wait_until(lambda: len(list(done.glob("lost-*/m/*/run-meta.json"))) >= 1)
        server.terminate()  # this test's own redis-server, by its pid
        server.wait(10)
        code = driver.wait(60)
    assert code == 1, driver.stdout + driver.stderr
    errors = [line for line in driver.stdout.splitlines() if "] error: " in line]
    assert len(errors) == 1 and "pools_store" in errors[0], driver.stdout
    assert "starting no more jobs" in errors[0]
    statuses = cli.statuses(_batch_dir(cli, "lost"))
    recorded = len(cli.records(_batch_dir(cli, "lost")))
    assert 1 <= recorded < 6
    assert list(statuses.values()).count("passed") == recorded
