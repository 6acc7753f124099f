"""The subscriber's Python API refuses bad durations, times and callbacks at the call.

Before session 18, ``wait_for_set_done(timeout=nan)`` on a table not registered
waited for ever (a NaN deadline is never reached), ``inf`` raised a bare
OverflowError from the OS's timer, a string a bare TypeError, and a
non-callable callback was accepted and then logged a traceback per message.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import pytest

from partition_notify.app import build_app
from partition_notify.cli.common import MAX_SECONDS
from partition_notify.core.errors import ValidationError

BAD_TIMEOUTS = [math.nan, math.inf, -math.inf, -1, MAX_SECONDS + 1, 10**400, "5", None, True]


@pytest.fixture
def sub(sqlite_url: str) -> Any:
    app = build_app(store_url=sqlite_url, transport_url="embedded://")
    app.publisher.register_table("db", "t", ["ds"])
    subscriber = app.subscriber()
    yield subscriber
    subscriber.close()
    app.close()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
@pytest.mark.parametrize("table", ["t", "not_registered"])
def test_wait_for_set_done_refuses_a_timeout_that_is_no_deadline(sub: Any, table: str,
                                                                 timeout: object) -> None:
    started = time.monotonic()
    with pytest.raises(ValidationError, match=r"timeout must be .*seconds"):
        sub.wait_for_set_done("db", table, "ds=1", timeout)  # type: ignore[arg-type]
    assert time.monotonic() - started < 5  # refused at the call, not after a wait


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -1, "x"], ids=repr)
def test_watch_set_done_and_wait_for_tables_refuse_a_bad_timeout(sub: Any,
                                                                 timeout: object) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        sub.watch_set_done("db", "t", "ds=1", timeout=timeout)
    with pytest.raises(ValidationError, match="timeout"):
        sub.wait_for_tables([("db", "nope")], timeout)


@pytest.mark.parametrize("since", [math.nan, math.inf, -1, "x"], ids=repr)
def test_history_and_subscribe_refuse_a_since_that_is_no_time(sub: Any, since: object) -> None:
    with pytest.raises(ValidationError, match="since"):
        sub.set_done_history("db", "t", since=since)
    with pytest.raises(ValidationError, match="since"):
        sub.subscribe("db.t", lambda m: None, since=since)


def test_a_callback_that_cannot_be_called_is_refused(sub: Any) -> None:
    with pytest.raises(ValidationError, match="callback must be callable"):
        sub.subscribe("db.t", 5)
    with pytest.raises(ValidationError, match="callback must be callable"):
        sub.watch_set_done("db", "t", "ds=1", "not a function")


def test_good_arguments_still_work(sub: Any, sqlite_url: str) -> None:
    with build_app(store_url=sqlite_url, transport_url="embedded://") as pub:
        pub.publisher.send_mark_set_done("db", "t", "ds=1")
    assert sub.wait_for_set_done("db", "t", "ds=1", 0).partition_spec == {"ds": "1"}
    assert sub.wait_for_set_done("db", "t", {"ds": 1}, 2.5).partition_spec == {"ds": "1"}
    assert [m.partition_spec for m in sub.set_done_history("db", "t", since=0)] == [{"ds": "1"}]


@pytest.mark.parametrize("bound", [0, -1, 1.5, "10", None, True], ids=repr)
def test_a_bad_inbox_bound_is_refused_by_name(sqlite_url: str, bound: object) -> None:
    from partition_notify.subscriber import Subscriber

    app = build_app(store_url=sqlite_url, transport_url="embedded://")
    try:
        with pytest.raises(ValidationError, match=rf"max_inbox must be a positive integer, "
                                                  rf"got {re.escape(repr(bound))}"):
            Subscriber(app.store, app.transport, max_inbox=bound)  # type: ignore[arg-type]
    finally:
        app.close()


def test_subscribing_to_an_unregistered_table_says_how_to_register_it(sub: Any) -> None:
    # As wait_for_set_done and every CLI command say it: the fix, not only the fault.
    from partition_notify.core.errors import UnknownTableError

    with pytest.raises(UnknownTableError) as caught:
        sub.subscribe(["db.t", "db.returns"], callback=print)
    assert str(caught.value) == ("table(s) db.returns not registered (register first: "
                                 "partition-notify register db.returns --keys ...)")


@pytest.mark.parametrize(("db", "table", "named"), [
    ("db", "t.x", "table name 't.x': illegal character(s) '.'"),
    ("db.x", "t", "database name 'db.x': illegal character(s) '.'"),
    ("db", "", "table name is empty"),
])
def test_a_name_with_a_dot_is_refused_naming_the_name(sub: Any, db: str, table: str,
                                                      named: str) -> None:
    """``wait_for_set_done("db", "t.x", ...)`` (a three-part name, Spark's
    catalog.db.table) said ``table reference ('db', 't.x') in [('db', 't.x')] is not
    one of: ...``: the internal pair, not which name is wrong and why."""
    calls = [
        lambda: sub.wait_for_set_done(db, table, "ds=1", timeout=0),
        lambda: sub.set_done_history(db, table),
        lambda: sub.is_partition_present(db, table, "ds=1"),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as err:
            call()
        assert named in str(err.value) and "table reference" not in str(err.value), err.value
