"""The ledger's file names, in one place for both its writer and its reader.

``run_support`` imports nothing of ``batch``; ``batch.layout`` re-uses these names, so each
is spelled once.
"""

from __future__ import annotations

#: One run's record, in its run dir (docs/ledger.md).
RUN_META = "run-meta.json"
#: What a job may write in its run dir to report its own outcome.
RESULT_JSON = "result.json"
#: The cache files earlier versions kept at the top of the batch dir (the index and its
#: journal, until issue 44): no longer written; the next resume removes them.
OLD_CACHE_NAMES = (".ledger-index", ".ledger-journal")
#: The driver's own directory in a batch dir: never a model dir, so the ledger skips it.
LOGS_DIR = "batch-logs"
