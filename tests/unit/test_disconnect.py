"""server/disconnect.py: which requests ask for their run to be cancelled when the client leaves."""

from __future__ import annotations

import json

import pytest

from server.disconnect import RUN_ROUTE, cancelling_body


@pytest.mark.parametrize(
    ("path", "matched"),
    [
        ("/threads/6f1c/runs/stream", True),
        ("/threads/6f1c/runs/wait", True),
        ("/runs/stream", True),
        ("/runs/wait/", True),
        ("/threads/6f1c/runs", False),  # a background run
        ("/threads/6f1c/runs/1e2d/stream", False),  # joining a run
        ("/api/v1/kb/runs/stream-notes", False),
    ],
)
def test_only_streamed_and_awaited_run_creations_are_matched(path, matched):
    assert bool(RUN_ROUTE.search(path)) is matched


def test_the_body_asks_for_cancel_whatever_it_said():
    for sent in ({"assistant_id": "react"}, {"assistant_id": "react", "on_disconnect": "continue"}):
        assert json.loads(cancelling_body(json.dumps(sent).encode()) or b"") == {**sent, "on_disconnect": "cancel"}
    assert cancelling_body(b'{"on_disconnect": "cancel"}') is None
    assert cancelling_body(b"not json") is None and cancelling_body(b"[1, 2]") is None
