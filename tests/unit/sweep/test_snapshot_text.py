"""The snapshot's YAML is ruamel's safe dump of the sweep's data, character for character,
though it is written with one shared ``Tag`` per tag (``snapshot._SharedTagRepresenter``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from batch.sweep.load import load_sweep
from batch.sweep.snapshot import _dump, snapshot_data, snapshot_text

SWEEP = """\
name: s
cases:
  - c01
  - {id: "a/b: c", timeout: 90.5, params: {difficulty: hard, n: 3, t: 0.25, ok: true, z: "007"}}
  - "2026-01-01"
  - {id: "yes", params: {empty: "", long: "%s", quote: "it's \\"x\\"", uni: "é✓"}}
models: [m1, {id: m2, env: {K: "v", SPACE: " lead"}}]
command: [agent, "{case}", "--flag=1"]
timeout: 1.5h
retry_backoff: 0.5
""" % ("x" * 300)


def ruamel_safe_dump(data: Any, *, pure: bool) -> str:
    """What ruamel itself writes, with the snapshot's settings and its own representer."""
    yaml = YAML(typ="safe", pure=pure)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 1 << 16
    stream = io.StringIO()
    yaml.dump(data, stream)
    return stream.getvalue()


@pytest.mark.parametrize("pure", [False, True])
def test_the_snapshot_yaml_is_ruamels_safe_dump(tmp_path: Path, pure: bool) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP, encoding="utf-8")
    data = snapshot_data(load_sweep(path))
    odd = {"nested": [{"a": [1, 2.5, None, True]}, [], {}], "keys": {"1": "one", "y": "n"}}
    for document in (data, {**data, "extra": odd}):
        written = _dump(document, pure=pure)
        assert written == ruamel_safe_dump(document, pure=pure)
        # A second dump shares the first one's tags: still the same text.
        assert _dump(document, pure=pure) == written


def test_the_written_snapshot_ends_with_that_yaml(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP, encoding="utf-8")
    data = snapshot_data(load_sweep(path))
    assert snapshot_text(data).endswith(ruamel_safe_dump(data, pure=False))
