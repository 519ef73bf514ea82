"""The ``notify`` and ``stall`` sweep keys through load_sweep, and in the snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch.errors import SweepError
from batch.sweep.features.notify import EVENTS, NotifySpec
from batch.sweep.load import Sweep, load_sweep
from batch.sweep.snapshot import sweep_snapshot

BASE = "cases: [c01]\nmodels: [m1]\ncommand: [python3, agent.py]\n"


def load(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Sweep:
    path = tmp_path / name
    path.write_text(BASE + text, encoding="utf-8")
    return load_sweep(path)


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(SweepError) as info:
        load(tmp_path, text)
    return str(info.value)


def test_off_by_default(tmp_path: Path) -> None:
    sweep = load(tmp_path, "")
    assert sweep.notify is None and sweep.stall is None


def test_notify_and_stall_are_read(tmp_path: Path) -> None:
    sweep = load(
        tmp_path,
        "notify:\n"
        "  commands: [[python3, notify/webhook.py, --format, text], [sh, notify/desktop.sh]]\n"
        "  timeout: 20s\n"
        "  events: [end, stall]\n"
        "stall: 30m\n",
    )
    assert sweep.notify == NotifySpec(
        (("python3", "notify/webhook.py", "--format", "text"), ("sh", "notify/desktop.sh")),
        timeout=20.0,
        events=frozenset({"end", "stall"}),
    )
    assert sweep.stall == 1800.0


def test_one_command_listens_to_every_event(tmp_path: Path) -> None:
    sweep = load(tmp_path, "notify: [notify-send, done]\nstall: null\n")
    assert sweep.notify == NotifySpec((("notify-send", "done"),))
    assert sweep.notify.events == frozenset(EVENTS)
    assert sweep.stall is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stall: 0s\n", "sweep.yaml:4:8: stall: must be more than 0 (null means off)"),
        ("stall: soon\n", "sweep.yaml:4:8: stall: "),
        (
            "notify: notify-send done\n",
            'must be a list of arguments (it runs without a shell), e.g. ["notify-send", "done"]',
        ),
        ("notify: {commands: [[x]], events: [ending]}\n", "unknown event 'ending'"),
    ],
)
def test_bad_values_are_located(tmp_path: Path, text: str, message: str) -> None:
    assert message in error_of(tmp_path, text)


def test_the_snapshot_keeps_them_and_reads_back_the_same(tmp_path: Path) -> None:
    sweep = load(
        tmp_path,
        "notify: {commands: [[sh, n.sh]], timeout: 5s, events: [stall, end]}\nstall: 90s\n",
    )
    again = load_sweep(_written(tmp_path, sweep_snapshot(sweep)))
    assert again.notify == sweep.notify
    assert again.stall == 90.0


def test_a_plain_sweeps_snapshot_does_not_mention_them(tmp_path: Path) -> None:
    text = sweep_snapshot(load(tmp_path, ""))
    assert "notify" not in text and "stall" not in text


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "snapshot.yaml"
    path.write_text(text, encoding="utf-8")
    return path
