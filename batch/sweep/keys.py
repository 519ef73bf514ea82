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

from batch.policies.attempts import DEFAULT_MAX_ATTEMPTS
from batch.sweep.cases import CASES
from batch.sweep.declare import DURATION, PATH, SIZE_REF, Key, Typed, choice, integer, or_null, ref
from batch.sweep.features.between_models import (
    BETWEEN_MODELS_SCHEMA,
    PROBE_SCHEMA,
    between_models_key,
    probe_key,
)
from batch.sweep.features.containers import CONTAINERS_SCHEMA, containers_key
from batch.sweep.features.executor import EXECUTOR_SCHEMA, executor_key
from batch.sweep.features.notify import NOTIFY_SCHEMA, notify_key
from batch.sweep.features.policies import (
    BREAKER_SCHEMA,
    BUDGET_SCHEMA,
    HALT_SCHEMA,
    breaker_key,
    budget_key,
    halt_key,
)
from batch.sweep.features.pools import POOL, POOLS, POOLS_STORE, check_pool_names
from batch.sweep.features.steps import STEPS_SCHEMA, steps_key, template_nodes
from batch.sweep.features.stop_when import STOP_WHEN_SCHEMA, check_compared_models, stop_when_key
from batch.sweep.features.worker import WORKER_SCHEMA, worker_key
from batch.sweep.nodes import (
    Node,
    argv_elements,
    as_choice,
    as_name,
    as_words,
    checked,
    string_keyed,
)
from batch.sweep.placeholders import check_placeholders, param_names
from batch.sweep.sizes import memfree_key
from batch.sweep.specs import ENV, MAX_REPEATS, MODELS, as_repeats
from run_support.results import NON_MODEL_FAILURE_CATEGORIES

ORDERS = ("interleave", "model-major")


# --- converters for the sweep's own keys ----------------------------------------------------


def _optional_name(node: Node) -> str | None:
    return None if node.value is None else as_name(node, "name")


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

_CATEGORIES = Typed(
    _categories,
    {"type": "array", "items": {"type": "string"}},
)
_LOG_PATTERNS = Typed(
    _log_patterns,
    {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
    },
)
_EXIT_CODES = Typed(
    _exit_codes,
    {
        "type": "object",
        "propertyNames": {
            "pattern": "^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$",
        },
        "additionalProperties": {"enum": ["passed", "failed", "error"]},
    },
)
COMMAND = Typed(_command, ref("command"))

#: The schema's shared definitions of this module's kinds.
SCHEMA_DEFS: dict[str, Any] = {
    "command": {
        "description": (
            "An argv list, run without a shell; placeholders such as "
            "{case}, {model}, {run_dir} are filled in."
        ),
        "type": "array",
        "minItems": 1,
        "items": {"type": ["string", "number"]},
    },
}

#: The sweep file's top-level keys, each declared once: its converter and schema, what it
#: means, and its default. The published schema is made of these rows (batch.sweep.schema).
KEYS: dict[str, Key] = {
    "name": Key(
        Typed(_optional_name, {"anyOf": [{"type": "string"}, {"type": "null"}]}),
        "part of the batch dir name",
        None,
    ),
    "output": Key(
        PATH, "output root, relative to the sweep file's directory; ~ is expanded", shown="runs"
    ),
    "cases": Key(
        CASES,
        (
            "the test cases: a list, {dir, glob} (one case per matching file) or {jsonl, id} (one"
            " per row of a JSON Lines file, .gz allowed)"
        ),
        fields=("cases", "dataset"),
    ),
    "models": Key(MODELS, "the models"),
    "command": Key(
        COMMAND,
        (
            "the job's argv, run without a shell; exactly one of command, steps and worker (or "
            "every model's own worker)"
        ),
    ),
    "env": Key(
        ENV,
        "environment variables added to every job; ${VAR} allowed",
        shown={},
        fields=("env", "env_templates"),
    ),
    "timeout": Key(
        or_null(DURATION, " (null means no limit)"),
        "per job; a case may override it; 0 is an error (null: no limit)",
        None,
    ),
    "kill_grace": Key(
        DURATION,
        "after the timeout or a second Ctrl-C: SIGTERM, wait this long, SIGKILL",
        10.0,
        shown="10s",
    ),
    "max_concurrent": Key(integer(1), "jobs running at once", 4),
    "stagger": Key(DURATION, "minimum gap between two job starts", 0.0, shown=0),
    "order": Key(
        choice(ORDERS),
        "interleave: cases outer, models inner; model-major: all of one model, then the next",
        "interleave",
    ),
    "retries": Key(
        integer(0),
        "automatic reruns of non-model failures within one invocation, within max_attempts",
        0,
    ),
    "retry_backoff": Key(
        DURATION, "wait before the first retry; doubles per retry, capped at 1 h", 30.0, shown="30s"
    ),
    "non_model_categories": Key(
        _CATEGORIES,
        (
            "failure categories that count as error (not the model's fault) and that --retry-"
            "failed reruns"
        ),
        NON_MODEL_FAILURE_CATEGORIES,
        shown=["infra_failure", "api_or_credit", "task_data", "build_instruction"],
    ),
    "log_patterns": Key(
        _LOG_PATTERNS,
        (
            "case-insensitive text in output.log that sets the category of a job that failed by "
            "its exit code; replaces the defaults"
        ),
        shown={"api_or_credit": ["429", "rate limit", "insufficient credit"]},
    ),
    "summary_interval": Key(
        DURATION,
        "at most one batch-summary.json rewrite per interval while jobs finish (0: every change)",
        2.0,
        shown="2s",
    ),
    "executor": Key(
        Typed(executor_key, EXECUTOR_SCHEMA),
        "where jobs run: local subprocesses, a Dask cluster, or Dask workers submitted to Slurm",
        shown="local",
    ),
    "steps": Key(
        Typed(lambda node: steps_key(node, _command), STEPS_SCHEMA),
        "replaces command: each job runs these in order in one run dir (eval → judge)",
    ),
    "between_models": Key(
        Typed(between_models_key, BETWEEN_MODELS_SCHEMA),
        "with order: model-major, what runs before each model's block",
        None,
    ),
    "memfree": Key(
        Typed(memfree_key, {"anyOf": [SIZE_REF, {"type": "null"}]}),
        "no job starts while less memory is available",
        None,
    ),
    "probe": Key(
        Typed(probe_key, PROBE_SCHEMA), "what batch check runs to see a model load; {model} allowed"
    ),
    "halt": Key(
        Typed(halt_key, HALT_SCHEMA),
        (
            "stop early: off, a rule soon|now,fail|error=N[%], or {rule, broken_setup, "
            "broken_setup_window}"
        ),
    ),
    "breaker": Key(
        Typed(breaker_key, BREAKER_SCHEMA),
        (
            "the per-model circuit breaker: every model's, unless a model sets its own "
            "(docs/policies.md)"
        ),
    ),
    "max_attempts": Key(
        integer(1),
        (
            "attempts one job may spend in its batch dir, in-run retries and --retry-failed "
            "invocations together"
        ),
        DEFAULT_MAX_ATTEMPTS,
    ),
    "budget": Key(
        Typed(budget_key, BUDGET_SCHEMA),
        "what the whole sweep may spend; once reached no new job starts and the batch ends halted",
    ),
    "notify": Key(
        Typed(notify_key, NOTIFY_SCHEMA),
        (
            "commands run (without a shell) when the batch ends, halts, is interrupted, stalls or"
            " recovers"
        ),
        None,
    ),
    "stall": Key(
        or_null(DURATION, " (null means off)"),
        "a stall event when jobs are running and none has finished for this long (null: off)",
        None,
    ),
    "exit_codes": Key(
        _EXIT_CODES,
        (
            "what a job's exit code (0-255) means when it writes no result.json, e.g. {1: error, "
            "2: failed}; by default 0 passed, 1 failed, the rest error"
        ),
        shown={},
    ),
    "containers": Key(
        Typed(containers_key, CONTAINERS_SCHEMA),
        (
            "the container engine whose containers a job starts (labelled {container_label}): "
            "every container carrying an attempt's label is removed when the attempt ends, and "
            "after a dead driver (null: none is run; docs/sweep-file.md, Containers)"
        ),
        None,
    ),
    "repeats": Key(
        Typed(as_repeats, {"type": "integer", "minimum": 1, "maximum": MAX_REPEATS}),
        (
            "samples of every case x model (repeat 1..N); the statistics then report pass@k, "
            "pass^k and flaky cases (docs/stats.md)"
        ),
        1,
    ),
    "worker": Key(
        Typed(worker_key, WORKER_SCHEMA),
        "replaces command: a program started once per slot serves every job (docs/worker.md)",
    ),
    "stop_when": Key(
        Typed(stop_when_key, STOP_WHEN_SCHEMA),
        (
            "stop a model once its pass rate is known to ±half_width, or a pair once the sign "
            "of B - A is known (or it lies within ±margin); the cases then run in a random "
            "order (docs/sweep-file.md#stop_when)"
        ),
        None,
    ),
    "pools": Key(
        POOLS,
        (
            "limits shared with every sweep whose models name the pool: {max_concurrent, rate, "
            "adaptive} (docs/policies.md, Pools)"
        ),
        shown={},
    ),
    "pool": Key(POOL, "the pool every model's jobs count against, unless a model names its own"),
    "pools_store": Key(
        POOLS_STORE,
        (
            "where the drivers share the pools: redis://HOST:PORT/DB (several machines) or an "
            "absolute directory; null: $XDG_STATE_HOME/batch-ledger/pools on this machine"
        ),
        None,
    ),
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
    check_compared_models,
)
