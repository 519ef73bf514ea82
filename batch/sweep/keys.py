"""The sweep file's top-level keys: one converter per key (the key table, ``KEYS``), the
keys a sweep must have, and the checks across keys (``CHECKS``); docs/sweep-file.md.

Each top-level key is one row of ``KEYS`` (key -> converter); a converter gets the value
with its location (a ``batch.sweep.nodes.Node``) and either returns the converted value or
raises a located error. A new key is a new row, a new ``Sweep`` field
(``batch.sweep.load``) and, when it depends on other keys, a new check in ``CHECKS``. The
converters of a feature's own keys live beside its spec (``specs``, ``executor_keys``,
``policy_keys``, ...); the ones here are the sweep's own.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from batch.sweep.features.between_models import between_models_key, probe_key
from batch.sweep.features.containers import containers_key
from batch.sweep.features.executor import executor_key
from batch.sweep.features.notify import notify_key
from batch.sweep.features.policies import breaker_key, budget_key, halt_key
from batch.sweep.features.pools import check_pool_names, pool_name, pools_key, pools_store_key
from batch.sweep.features.steps import steps_key, template_nodes
from batch.sweep.features.worker import worker_key
from batch.sweep.nodes import (
    Node,
    argv_elements,
    as_choice,
    as_duration,
    as_integer,
    as_name,
    as_path,
    as_positive_duration,
    as_words,
    checked,
    string_keyed,
)
from batch.sweep.placeholders import check_placeholders, param_names
from batch.sweep.sizes import memfree_key
from batch.sweep.specs import as_repeats, cases_key, env_key, models_key

ORDERS = ("interleave", "model-major")


# --- converters for the sweep's own keys ----------------------------------------------------


def _optional_name(node: Node) -> str | None:
    return None if node.value is None else as_name(node, "name")


def _time_limit(node: Node) -> float | None:
    """A timeout: a positive duration, or null for no limit."""
    return None if node.value is None else as_positive_duration(node, " (null means no limit)")


def _stall(node: Node) -> float | None:
    """``stall``: a positive duration, or null for no stall events."""
    return None if node.value is None else as_positive_duration(node, " (null means off)")


#: What an exit code may be made to mean (``exit_codes``).
EXIT_OUTCOMES = ("passed", "failed", "error")


def _exit_codes(node: Node) -> dict[int, str]:
    """``{1: error, 2: failed}``: exit codes 0-255, each an outcome."""
    if not isinstance(node.value, Mapping):
        raise node.type_error("a mapping of exit codes to outcomes, e.g. {1: error, 2: failed}")
    codes = {}
    for key, value in node.entries():
        code = key.value
        if not isinstance(code, int) or isinstance(code, bool) or not 0 <= code <= 255:
            raise key.error(f"{node.label}: {code!r} is not an exit code (0 to 255)")
        codes[int(code)] = as_choice(value, EXIT_OUTCOMES)
    return codes


def _categories(node: Node) -> frozenset[str]:
    return frozenset(as_words(node))


def _log_patterns(node: Node) -> dict[str, tuple[str, ...]]:
    return {key.value: as_words(value) for key, value in string_keyed(node)}


def _command(node: Node) -> tuple[str, ...]:
    if isinstance(node.value, str):
        try:
            words = shlex.split(node.value)
        except ValueError:
            words = node.value.split()
        as_list = "[" + ", ".join(map(_flow_item, words)) + "]"
        raise node.error(
            f"{node.label}: must be a list of arguments (it runs without a shell), e.g. {as_list}"
        )
    if not isinstance(node.value, list):
        raise node.type_error("a list of strings")
    if not node.value:
        raise node.error(f"{node.label}: is empty")
    return argv_elements(node, lambda item: checked(item, check_placeholders))


def _flow_item(word: str) -> str:
    """``word`` as an item of a YAML flow list, quoted only when it has to be."""
    return word if _PLAIN_WORD.fullmatch(word) else json.dumps(word, ensure_ascii=False)


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./=+@][A-Za-z0-9_./=+@-]*|--?[A-Za-z0-9][A-Za-z0-9_.=-]*")


# --- the key table ---------------------------------------------------------------------------


@attrs.frozen
class Key:
    """One row of the key table: how the key's value is converted, and where it goes."""

    convert: Callable[[Node], Any]
    #: The ``Sweep`` fields a tuple result is spread over; empty: the field named as the key.
    fields: tuple[str, ...] = ()


KEYS: dict[str, Key] = {
    "name": Key(_optional_name),
    "output": Key(as_path),
    "cases": Key(cases_key, fields=("cases", "dataset")),
    "models": Key(models_key),
    "command": Key(_command),
    "env": Key(env_key, fields=("env", "env_templates")),
    "timeout": Key(_time_limit),
    "kill_grace": Key(as_duration),
    "max_concurrent": Key(as_integer(1)),
    "stagger": Key(as_duration),
    "order": Key(lambda node: as_choice(node, ORDERS)),
    "retries": Key(as_integer(0)),
    "retry_backoff": Key(as_duration),
    "non_model_categories": Key(_categories),
    "log_patterns": Key(_log_patterns),
    "summary_interval": Key(as_duration),
    "executor": Key(executor_key),
    "steps": Key(lambda node: steps_key(node, _command)),
    "between_models": Key(between_models_key),
    "memfree": Key(memfree_key),
    "probe": Key(probe_key),
    "halt": Key(halt_key),
    "breaker": Key(breaker_key),
    "max_attempts": Key(as_integer(1)),
    "budget": Key(budget_key),
    "notify": Key(notify_key),
    "stall": Key(_stall),
    "exit_codes": Key(_exit_codes),
    "containers": Key(containers_key),
    "repeats": Key(as_repeats),
    "worker": Key(worker_key),
    "pools": Key(pools_key),
    "pool": Key(pool_name),
    "pools_store": Key(pools_store_key),
}
#: Besides these, exactly one of ``command``, ``steps`` and ``worker`` (none when every
#: model names its own ``worker``).
REQUIRED_KEYS = ("cases", "models")


def _template_items(nodes: Mapping[str, Node]) -> Iterator[Node]:
    """Every string placeholders are filled into: the command's items, or the steps'."""
    if "command" in nodes:
        yield from nodes["command"].elements()
    if "steps" in nodes:
        yield from template_nodes(nodes["steps"])


def _check_case_params(nodes: Mapping[str, Node], fields: Mapping[str, Any]) -> None:
    """Every ``{params.NAME}`` in the command (or a step) must be set by every case."""
    for item in _template_items(nodes):
        if not isinstance(item.value, str):
            continue
        for name in checked(item, param_names):
            missing = [case.id for case in fields["cases"] if name not in case.params]
            if missing:
                more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
                raise item.error(
                    f"{item.label}: {{params.{name}}} is not set for case {missing[0]!r}{more} "
                    f"(every case needs params: {{{name}: ...}})"
                )


def _check_queue_order(nodes: Mapping[str, Node], fields: Mapping[str, Any]) -> None:
    """Between-models work only makes sense when one model's jobs run as a block."""
    if fields.get("order") == "model-major":
        return
    need = "needs order: model-major (one model's jobs at a time)"
    if "between_models" in nodes and fields["between_models"] is not None:
        raise nodes["between_models"].error(f"between_models: {need}")
    for model, item in zip(fields["models"], nodes["models"].elements(), strict=True):
        if model.between_models:
            raise item.error(f"{item.label}.between_models: {need}")


#: Checks that need more than one key, run after every key converted.
CHECKS: tuple[Callable[[Mapping[str, Node], Mapping[str, Any]], None], ...] = (
    _check_case_params,
    _check_queue_order,
    check_pool_names,
)
