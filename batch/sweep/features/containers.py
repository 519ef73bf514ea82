"""The sweep's ``containers`` key: the container engine whose containers a job starts, so
the driver removes them when the attempt ends (docs/sweep-file.md, "Containers").

``containers: podman`` or ``docker``, or ``{engine: NAME_OR_PATH, stop_timeout: 10s,
check_run: [IMAGE, ARGS...]}``. Its converter, :func:`containers_key`, is one row of
the key table (``batch.sweep.keys.KEYS``). Without the key nothing about containers is run or
imported (``batch.processes.containers`` is imported only where a sweep sets it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from batch.sweep.declare import mapping_of
from batch.sweep.nodes import (
    Node,
    argv_elements,
    as_path,
    as_positive_duration,
    as_string,
)

__all__ = ["DEFAULT_STOP_TIMEOUT", "ENGINES", "ContainerSpec", "containers_key"]

ENGINES = ("podman", "docker")
#: How long removing one attempt's containers may take, every engine command included.
DEFAULT_STOP_TIMEOUT = 10.0
_HINT = "podman, docker, or {engine: NAME_OR_PATH, stop_timeout: DURATION, check_run: [...]}"


@attrs.frozen
class ContainerSpec:
    """The engine to remove an attempt's containers with."""

    #: A program name (looked up on PATH when it runs) or an absolute path.
    engine: str
    #: The bound on one removal: listing, stopping and removing, together.
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    #: What ``batch check`` runs after ``ENGINE run --detach --label LABEL``: an image and
    #: its command (``[busybox, sleep, "60"]``); empty: the test container is not tried.
    check_run: tuple[str, ...] = ()


def containers_key(node: Node) -> ContainerSpec | None:
    """``podman``, ``docker``, null (off), or ``{engine, stop_timeout, check_run}``."""
    if node.value is None:
        return None
    if isinstance(node.value, str):
        if node.value not in ENGINES:
            raise node.error(f"{node.label}: must be {_HINT}, not {node.value!r}")
        return ContainerSpec(engine=node.value)
    if not isinstance(node.value, Mapping):
        raise node.type_error(_HINT)
    keys = mapping_of(node, CONTAINERS_SCHEMA["anyOf"][1])
    fields: dict[str, Any] = {"engine": _engine(keys["engine"])}
    if "stop_timeout" in keys:
        fields["stop_timeout"] = as_positive_duration(keys["stop_timeout"])
    if "check_run" in keys:
        found = keys["check_run"]
        if not isinstance(found.value, list) or not found.value:
            raise found.type_error("a non-empty list: an image and its command")
        fields["check_run"] = argv_elements(found)
    return ContainerSpec(**fields)


def _engine(node: Node) -> str:
    """A name without a ``/`` stays a name (found on PATH where it runs: the driver's host,
    a Dask worker's); a path is made absolute relative to the sweep file's directory."""
    text = as_string(node)
    if not text:
        raise node.error(f"{node.label}: empty (podman, docker, or the engine's path)")
    if "/" not in text:
        return text
    return str(as_path(node))


#: ``containers``: its schema.
CONTAINERS_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"enum": ["podman", "docker"]},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["engine"],
            "properties": {
                "engine": {
                    "description": (
                        "podman, docker, another name looked up on PATH, or"
                        " a path (relative to the sweep file)"
                    ),
                    "type": "string",
                    "minLength": 1,
                },
                "stop_timeout": {
                    "description": (
                        "the bound on removing one attempt's containers, "
                        "every engine command included"
                    ),
                    "$ref": "#/$defs/duration",
                    "default": "10s",
                },
                "check_run": {
                    "description": (
                        "what batch check starts after ENGINE run --detach "
                        "--label LABEL: an image and its command, e.g. "
                        '[busybox, sleep, "60"]'
                    ),
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": ["string", "number"]},
                },
            },
        },
        {"type": "null"},
    ],
}
