"""Every name in a batch dir, and the names made from case and model names.

The files and directories a batch dir holds::

    BATCH_DIR/
      sweep.yaml                 SNAPSHOT: the resolved sweep of the first invocation
      batch-summary.json         SUMMARY_NAME (docs/summary.md)
      report.html                REPORT: ``batch report``'s default output
      batch-logs/                LOGS_DIR: the driver's own files
        events.jsonl             EVENTS: one line per driver event
        events-<n>.jsonl.gz      rotated events, oldest first (batch.event_segments)
        driver.lock              LOCK
        pgids.json               PGIDS: the live job process groups, for the watchdog
        between-models.log       BETWEEN_MODELS_LOG
        notify.log               NOTIFY_LOG: every notify command's output and outcome
        workers.log              WORKERS_LOG: what warm workers wrote serving no one request
        sweep-<stamp>.yaml       snapshot_history_name(): the sweep of a changed resume
        dask-claims/<token>/     DASK_CLAIMS
      <model_dir>/<run_dir>/     model_dir_name(), run_dir_name()
        run-meta.json            RUN_META: the run's record (run_support, docs/ledger.md)
        result.json              RESULT_JSON: what the job reported (run_support)
        output.log               OUTPUT_LOG: the job's stdout and stderr
        case.json                CASE_JSON: a dataset case's row (cases: {jsonl: ...})

Every attempt is also named outside the batch dir: its containers carry the label
``container_label()`` (``batch-ledger.run=<batch id>/<model_dir>/<run_dir>``), by which
the driver finds and removes them (``batch.processes.containers``).

``batch check`` writes ``OUTPUT/checks/<name>-<stamp>/`` (CHECKS_DIR) holding CHECK_REPORT
and CHECK_TABLE beside its own ``batch-logs/``. The ledger's names are defined in
``run_support.names`` (``run_support`` imports nothing of ``batch``) and re-used here. The
ledger's cache is not in the batch dir (``run_support.ledger_cache``); the files an earlier
version kept there for it (``OLD_CACHE_NAMES``) are removed by the next resume.

Run dir names are cosmetic — identity always comes from ``run-meta.json`` — so the only
duties of the naming functions are that a name reads like the original, that it is one
harmless path component (never ``.``, ``..``, empty, hidden or containing ``/``), and that
it stays short enough for any filesystem.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from run_support.names import LOGS_DIR, OLD_CACHE_NAMES, RESULT_JSON, RUN_META

__all__ = [
    "BETWEEN_MODELS_LOG",
    "CASE_ORDER",
    "CHECKS_DIR",
    "CHECK_REPORT",
    "CHECK_TABLE",
    "CONTAINER_LABEL_KEY",
    "DASK_CLAIMS",
    "EVENTS",
    "LOCK",
    "LOGS_DIR",
    "MAX_NAME",
    "MAX_SNAPSHOT_BYTES",
    "NOTIFY_LOG",
    "OLD_CACHE_NAMES",
    "OUTPUT_LOG",
    "PGIDS",
    "REPORT",
    "RESERVED_DIRS",
    "RESULT_JSON",
    "RUN_META",
    "SNAPSHOT",
    "SNAPSHOT_HISTORY_GLOB",
    "SUMMARY_NAME",
    "WORKERS_LOG",
    "container_label",
    "model_dir_name",
    "run_dir_name",
    "run_stamp",
    "safe_name",
    "snapshot_history_name",
]

SNAPSHOT = "sweep.yaml"
#: The largest sweep snapshot read back (its cases inline: ~100 bytes each); a larger file
#: in its place is refused unread, as every file of a batch dir is read to a bound.
MAX_SNAPSHOT_BYTES = 256 << 20
#: The batch dir's summary of every job (docs/summary.md).
SUMMARY_NAME = "batch-summary.json"
REPORT = "report.html"
EVENTS = "events.jsonl"
LOCK = "driver.lock"
PGIDS = "pgids.json"
BETWEEN_MODELS_LOG = "between-models.log"
NOTIFY_LOG = "notify.log"
WORKERS_LOG = "workers.log"
DASK_CLAIMS = "dask-claims"
SNAPSHOT_HISTORY_GLOB = "sweep-*.yaml"
#: The seed of the random case order of a ``stop_when`` sweep (docs/sweep-file.md).
CASE_ORDER = "case-order.json"
OUTPUT_LOG = "output.log"
CASE_JSON = "case.json"
CHECKS_DIR = "checks"
CHECK_REPORT = "check.json"
CHECK_TABLE = "check.md"

#: The key of the label every container an attempt starts should carry ({container_label}).
CONTAINER_LABEL_KEY = "batch-ledger.run"

#: Top-level entries of a batch dir that belong to the driver; a model dir must not be one.
RESERVED_DIRS = frozenset({LOGS_DIR, SUMMARY_NAME, SNAPSHOT})

#: Longest component :func:`safe_name` returns; a run dir name is two of them plus ~35.
MAX_NAME = 80
_HASH_LEN = 8
_SEPARATORS = re.compile(r"[/:]")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def container_label(batch_id: str, rel_run_dir: str) -> str:
    """``batch-ledger.run=<batch id>/<model_dir>/<run_dir>``: the one ``key=value`` label of an
    attempt's containers (``--label {container_label}``), naming its batch and run dir, so
    the driver, its watchdog and the next driver find exactly that attempt's containers."""
    return f"{CONTAINER_LABEL_KEY}={batch_id}/{rel_run_dir}"


def snapshot_history_name(stamp: str) -> str:
    """``sweep-<stamp>.yaml`` under :data:`LOGS_DIR`: the sweep a resume ran under when it
    differs from the snapshot; the newest such file is the one the batch last ran."""
    return f"sweep-{stamp}.yaml"


def safe_name(name: str) -> str:
    """``name`` as one path component: ``openai/gpt-4o`` → ``openai--gpt-4o``.

    Every character outside ``[A-Za-z0-9._-]`` becomes ``-``, and ``/`` or ``:`` become
    ``--`` so a provider prefix stays visible. Leading dots become ``-`` (no hidden, ``.``
    or ``..`` names), empty becomes ``-``. Past :data:`MAX_NAME` characters the name is cut
    and a hash of the full original appended, so distinct long names stay distinct.
    """
    safe = _UNSAFE.sub("-", _SEPARATORS.sub("--", name))
    stripped = safe.lstrip(".")
    safe = "-" * (len(safe) - len(stripped)) + stripped
    if not safe:
        return "-"
    if len(safe) > MAX_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
        safe = f"{safe[: MAX_NAME - _HASH_LEN - 1]}-{digest}"
    return safe


def model_dir_name(model: str) -> str:
    """The directory under the batch dir that holds ``model``'s run dirs."""
    name = safe_name(model)
    # A model literally named "batch-logs" must not have its records hidden among driver files.
    return f"{name}-model" if name in RESERVED_DIRS else name


def run_stamp(moment: float) -> str:
    """UTC stamp for a run dir name, to the microsecond: ``20261130T031500123456Z``."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y%m%dT%H%M%S%fZ")


def run_dir_name(case: str, model: str, stamp: str, attempt: int, repeat: int = 1) -> str:
    """``<case_safe>-<model_safe>-<stamp>-a<attempt>``, e.g. ``c01-openai--gpt-4o-…-a1``;
    a repeat past the first says which: ``…-r2-a1`` (repeat 1 is named as before repeats,
    so a batch that had none reads the same). The record, not the name, says what a run
    is; the name is for a person looking."""
    if repeat == 1:
        return f"{safe_name(case)}-{safe_name(model)}-{stamp}-a{attempt}"
    return f"{safe_name(case)}-{safe_name(model)}-{stamp}-r{repeat}-a{attempt}"
