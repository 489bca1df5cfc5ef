"""Reading the evals' JSONL files: one JSON value a line, blank lines skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


def numbered_rows(path: Path, error: type[Exception]) -> Iterator[tuple[int, object]]:
    """(line number, parsed value) for each non-blank line of `path`; a line that is not JSON
    raises `error` naming the file and line."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except ValueError as exc:
            raise error(f"{path.name}:{number}: not JSON: {exc}") from exc
