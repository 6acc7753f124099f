"""The ``headers`` of a logged event as read back, damaged or not.

``pn_events.headers`` is JSON text on SQLite and a ``json`` column on
PostgreSQL. A broken tool or a half-done manual edit can leave a row whose value
is not JSON, or JSON that is not an object (a list, a string, null). Every
follower of the log reads every row in id order, so a reader that raised on
such a row raised on every pass: every later event of every table stalled
behind it, for ever. Headers are a pure function of the message (contract
``headers_for``), so a damaged value is rebuilt from the row's body - nothing
is lost, the order stands - and the damage is logged at ERROR, naming the
event, its topic, the field and what was wrong, once per event per process.
A body that does not decode either leaves nothing to verify the message by:
the row is *unverifiable* (:attr:`LoggedEvent.unverifiable` names the event,
topic, both fields and what was expected), its headers are empty. A relay
dead-letters it instead of sending it (publisher/relay.py); every reader of
the log skips it as malformed (the embedded subscriber counts it in
``malformed``; catch-up reads, SSE, the push sink and the follower find no
table or kind in it). Either way the one ERROR line here, per event per
process, and ``pn_log_unverifiable_events_total`` make it visible.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from sqlalchemy import ColumnElement, Text, type_coerce

from partition_notify.contract import decode
from partition_notify.contract.messages import headers_for
from partition_notify.core.errors import MalformedMessageError

log = logging.getLogger("partition_notify.store.log_headers")

#: Damaged events already reported by this process (bounded: once full, the
#: oldest half is forgotten, and an event seen again is reported again).
REPORTED_BOUND = 10_000
_reported: dict[tuple[int, int], None] = {}
_reported_lock = threading.Lock()
_damaged = 0
_unverifiable = 0


def damaged_events() -> int:
    """Damaged events this process reported (the ``pn_log_damaged_headers`` metric)."""
    return _damaged


def unverifiable_events() -> int:
    """Of :func:`damaged_events`, those whose body does not decode either (the
    ``pn_log_unverifiable_events`` metric)."""
    return _unverifiable


def raw_headers(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """``column`` read without SQLAlchemy's JSON decoding, which raised on a damaged
    row before any code of ours could look at it (SQLite: the text as stored;
    PostgreSQL: what the driver decoded)."""
    return type_coerce(column, Text)


def read_headers(event_id: int, topic: str, body: str, raw: object) -> dict[str, str]:
    """The headers of one logged event from the stored ``raw`` value."""
    return checked_headers(event_id, topic, body, raw)[0]


def checked_headers(event_id: int, topic: str, body: str,
                    raw: object) -> tuple[dict[str, str], str]:
    """The headers of one logged event, and why it is unverifiable ("" when it is not)."""
    value, problem = _parsed(raw)
    if problem is None:
        assert isinstance(value, dict)
        return value, ""
    headers, why = _from_body(event_id, topic, body, problem)
    if _first_report((event_id, hash(body)), unverifiable=bool(why)):  # ids repeat across stores
        outcome = ("the body does not decode either: unverifiable, never sent (a relay "
                   "dead-letters it), skipped as malformed by every reader" if why
                   else "rebuilt from the body; delivered")
        log.error("event log: event %d of topic %s: field 'headers' %s; %s. Repair the row "
                  "(UPDATE pn_events SET headers = ... WHERE event_id = %d)",
                  event_id, topic, problem, outcome, event_id)
    return headers, why


def diagnose(event_id: int, topic: str, body: str, raw: object) -> tuple[str, str] | None:
    """What is wrong with a row's ``headers`` and why it is unverifiable ("" if it is
    not), None when nothing is; neither logged nor counted (the ops page, the CLI)."""
    problem = _parsed(raw)[1]
    if problem is None:
        return None
    return f"field 'headers' {problem}", _from_body(event_id, topic, body, problem)[1]


def _parsed(raw: object) -> tuple[object, str | None]:
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError as exc:
            return None, f"is not JSON ({exc}): {raw[:80]!r}"
    if not isinstance(value, dict):
        return value, (f"is a JSON {type(value).__name__}, expected a JSON object: "
                       f"{str(raw)[:80]!r}")
    return value, None


def _from_body(event_id: int, topic: str, body: str,
               problem: str) -> tuple[dict[str, str], str]:
    try:
        return headers_for(decode(body)), ""
    except MalformedMessageError as exc:
        return {}, (f"event {event_id} of topic {topic} is unverifiable: field 'headers' "
                    f"{problem}, and field 'body' does not decode ({exc}), expected a "
                    "partition-notify message (a JSON object)")


def _first_report(key: tuple[int, int], *, unverifiable: bool) -> bool:
    global _damaged, _unverifiable
    with _reported_lock:
        if key in _reported:
            return False
        if len(_reported) >= REPORTED_BOUND:
            # The oldest half (at least one): a bound of 1 must not grow for ever.
            for old in list(_reported)[: max(1, REPORTED_BOUND // 2)]:
                del _reported[old]
        _reported[key] = None
        _damaged += 1
        _unverifiable += unverifiable
        return True
