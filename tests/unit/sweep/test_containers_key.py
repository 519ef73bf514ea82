"""The sweep's ``containers`` key and the ``{container_label}`` placeholder."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from ruamel.yaml import YAML

from batch.errors import SweepError
from batch.sweep.features.containers import ContainerSpec
from batch.sweep.load import load_sweep
from batch.sweep.snapshot import sweep_snapshot

BASE = 'cases: [c1]\nmodels: [m]\ncommand: [podman, run, --label, "{container_label}", img]\n'


def load(tmp_path: Path, extra: str) -> object:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + extra)
    return load_sweep(path)


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(SweepError) as caught:
        load(tmp_path, extra)
    return str(caught.value)


def test_without_the_key_there_is_no_engine_and_the_label_placeholder_still_loads(
    tmp_path: Path,
) -> None:
    sweep = load(tmp_path, "")
    assert sweep.containers is None
    assert sweep.command[3] == "{container_label}"


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_an_engine_by_name_gets_the_default_stop_timeout(tmp_path: Path, engine: str) -> None:
    assert load(tmp_path, f"containers: {engine}\n").containers == ContainerSpec(engine, 10.0)


def test_the_mapping_form_takes_a_path_a_stop_timeout_and_a_check_run(tmp_path: Path) -> None:
    sweep = load(
        tmp_path,
        "containers: {engine: bin/podman, stop_timeout: 3s, check_run: [busybox, sleep, 60]}\n",
    )
    assert sweep.containers == ContainerSpec(
        str((tmp_path / "bin" / "podman").resolve()), 3.0, ("busybox", "sleep", "60")
    )


def test_an_engine_named_without_a_slash_is_left_to_path(tmp_path: Path) -> None:
    assert load(tmp_path, "containers: {engine: nerdctl}\n").containers.engine == "nerdctl"


@pytest.mark.parametrize(
    ("value", "where", "message"),
    [
        ("podmn", "4:13", "containers: must be podman, docker, or {engine: NAME_OR_PATH"),
        ("3", "4:13", "containers: expected podman, docker, or {engine"),
        ("{stop_timeout: 3s}", "4:13", "missing required key 'engine'"),
        ("{engine: podman, stop_timout: 3s}", "4:30", "unknown key 'stop_timout'"),
        ("{engine: podman, stop_timeout: 0}", "4:44", "must be more than 0"),
        ('{engine: ""}', "4:22", "containers.engine: empty"),
        ("{engine: podman, check_run: []}", "4:41", "expected a non-empty list"),
    ],
)
def test_a_bad_value_is_one_located_line(
    tmp_path: Path, value: str, where: str, message: str
) -> None:
    text = error(tmp_path, f"containers: {value}\n")
    assert f"sweep.yaml:{where}: " in text, text
    assert message in text, text
    assert "\n" not in text


def test_the_snapshot_keeps_the_key_and_reads_back_the_same(tmp_path: Path) -> None:
    sweep = load(tmp_path, "containers: {engine: docker, stop_timeout: 2s, check_run: [img]}\n")
    text = sweep_snapshot(sweep)
    assert YAML(typ="safe").load(text)["containers"] == {
        "engine": "docker",
        "stop_timeout": 2.0,
        "check_run": ["img"],
    }
    again = tmp_path / "snapshot.yaml"
    again.write_text(text)
    assert attrs.evolve(load_sweep(again), path=sweep.path) == sweep


def test_the_snapshot_of_a_sweep_without_it_has_no_such_key(tmp_path: Path) -> None:
    assert "containers" not in YAML(typ="safe").load(sweep_snapshot(load(tmp_path, "")))
