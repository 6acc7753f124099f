"""Consumer cursors (migration 0006): start, advance, intent and lease, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from partition_notify.core.errors import ConflictError, InvalidNameError


@pytest.fixture
def cursors(app: Any) -> Any:
    from partition_notify.store.cursors import Cursors

    app.publisher.register_table("sales", "orders", ["datestamp"])
    app.publisher.send_mark_set_done("sales", "orders", "datestamp=1")
    return Cursors(app.store)


def test_new_cursor_starts_at_the_end_of_the_log_and_only_moves_forward(cursors: Any) -> None:
    end = cursors.store.log.max_event_id()
    assert cursors.open("a").event_id == end
    assert cursors.open("b", start=0).event_id == 0
    cursors.advance("a", end + 5)
    cursors.advance("a", end + 1)  # late, smaller: ignored
    assert cursors.get("a").event_id == end + 5
    assert cursors.open("a").event_id == end + 5  # open never resets


def test_intent_needs_the_lease_and_advance_clears_it(cursors: Any) -> None:
    cursors.open("push", start=0)
    assert cursors.claim("push", "p1", 60)
    assert not cursors.claim("push", "p2", 60)  # held by p1
    cursors.intend("push", 1, "p1", 60)
    with pytest.raises(ConflictError, match="lease lost"):
        cursors.intend("push", 1, "p2", 60)
    got = cursors.get("push")
    assert (got.pending_event_id, got.pending_since is not None) == (1, True)
    cursors.advance("push", 1)
    assert cursors.get("push").pending_event_id is None
    cursors.release("push", "p1")
    assert cursors.claim("push", "p2", 60)
    assert cursors.claim("push", "p2", -1) and cursors.claim("push", "p3", 60)  # expired lease


@pytest.mark.parametrize("name", ["", "x" * 201, 5, None, ["c"]])
def test_bad_cursor_name_is_rejected(cursors: Any, name: Any) -> None:
    with pytest.raises(InvalidNameError, match="cursor name"):
        cursors.open(name)
    with pytest.raises(InvalidNameError, match="no cursor named"):
        cursors.advance("missing", 1)
