"""One error record per failed run in the server log.

langgraph_api logs every failed run twice, each time with the whole traceback: "Run encountered
an error in graph: ..." where the graph raised, then "Background run failed. Exception: ..." where
the run is marked as failed. Neither has a setting, so the first is dropped here; the second keeps
the error type, message, run and thread ids and the traceback. A reach-in to langgraph_api's log
text: tests/unit/test_server_logs.py fails loudly if that text changes.
"""

from __future__ import annotations

import logging

WORKER_LOGGER = "langgraph_api.worker"
DUPLICATE_RUN_ERROR = "Run encountered an error in graph"


class DropDuplicateRunError(logging.Filter):
    """Drops langgraph_api's first (duplicate) record of a failed run."""

    def filter(self, record: logging.LogRecord) -> bool:
        # structlog hands the stdlib logger its event dict (ProcessorFormatter.wrap_for_formatter)
        event = record.msg.get("event") if isinstance(record.msg, dict) else record.msg
        return not (isinstance(event, str) and event.startswith(DUPLICATE_RUN_ERROR))


def quiet_duplicate_run_errors() -> None:
    """Install the filter on langgraph_api's worker logger (idempotent)."""
    worker = logging.getLogger(WORKER_LOGGER)
    if not any(isinstance(f, DropDuplicateRunError) for f in worker.filters):
        worker.addFilter(DropDuplicateRunError())
