"""server/logs.py keeps one record per failed run; these fail when langgraph_api changes its text."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from server.logs import DUPLICATE_RUN_ERROR, WORKER_LOGGER, DropDuplicateRunError


def test_langgraph_api_still_logs_the_duplicate_we_drop():
    spec = importlib.util.find_spec(WORKER_LOGGER)  # the module logs under its own name
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text()
    assert "logger = structlog.stdlib.get_logger(__name__)" in source
    assert f'f"{DUPLICATE_RUN_ERROR}: ' in source
    assert 'f"Background run failed. Exception: ' in source


def record(msg) -> logging.LogRecord:
    return logging.LogRecord(WORKER_LOGGER, logging.ERROR, __file__, 1, msg, None, None)


def test_only_the_duplicate_is_dropped():
    drop = DropDuplicateRunError()
    assert not drop.filter(record({"event": f"{DUPLICATE_RUN_ERROR}: <class 'ValueError'>(bad)"}))
    assert drop.filter(record({"event": "Background run failed. Exception: <class 'ValueError'>(bad)"}))
    assert drop.filter(record("Starting background run"))
