"""Python API input checks (issue 10, items 9, 10, 12, 14).

Each call is rejected up front with one of our errors naming the field, the
value and what was expected, the store is untouched, and SQLite and
PostgreSQL answer alike (``app`` fixture runs on both).
"""

from __future__ import annotations

import pytest

from partition_notify.contract import names, spec
from partition_notify.core.errors import InvalidNameError, InvalidSpecError, ValidationError
from tests.store.helpers import snapshot

DB, TABLE = "sales", "orders"


def rejected(app, exc_type, needles, fn, *args, **kwargs):
    before = snapshot(app.store.engine)
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
    assert snapshot(app.store.engine) == before, "a rejected call changed the store"
    return info.value


@pytest.fixture
def table(app):
    app.publisher.register_table(DB, TABLE, ["k"], retention_seconds=3600, location="/a")
    return app


# -- item 9: more partition keys than every later operation accepts --------------
def test_register_refuses_more_keys_than_specs_allow(app):
    keys = [f"k{i}" for i in range(names.MAX_PARTITION_KEYS + 1)]
    rejected(app, InvalidNameError, ["13 partition keys", f"at most {names.MAX_PARTITION_KEYS}"],
             app.publisher.register_table, DB, TABLE, keys)


def test_a_table_with_the_most_keys_works_end_to_end(app):
    keys = [f"k{i}" for i in range(names.MAX_PARTITION_KEYS)]
    assert spec.MAX_SPEC_KEYS == names.MAX_PARTITION_KEYS
    app.publisher.register_table(DB, TABLE, keys)
    full = {k: "1" for k in keys}
    assert len(app.publisher.announce_partitions(DB, TABLE, [full])) == 1
    app.publisher.send_mark_set_done(DB, TABLE, {"k0": "1"})
    with app.subscriber() as sub:
        assert sub.wait_for_set_done(DB, TABLE, full, timeout=5).partition_spec == {"k0": "1"}


# -- item 10: re-registering with a new retention or location --------------------
def test_reregister_applies_a_new_retention_and_location(table):
    info = table.publisher.register_table(DB, TABLE, ["k"], retention_seconds=7200,
                                          location="/b")
    assert (info.retention_seconds, info.location) == (7200, "/b")
    stored = table.publisher.table(DB, TABLE)
    assert (stored.retention_seconds, stored.location) == (7200, "/b")


def test_reregister_without_them_keeps_what_is_stored(table):
    info = table.publisher.register_table(DB, TABLE, ["k"])
    assert (info.retention_seconds, info.location) == (3600, "/a")


# -- item 12: names are ASCII -----------------------------------------------------
@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda p: p.register_table(DB, "kel", ["\u212aey"]), "partition key '\u212aey'"),
        (lambda p: p.register_table("\u212a", "kel", ["k"]), "database name '\u212a'"),
        (lambda p: p.register_table(DB, "\u212ael", ["k"]), "table name '\u212ael'"),
        (lambda p: p.register_table(DB, "\u0131d", ["k"]), "table name '\u0131d'"),
    ],
)
def test_non_ascii_names_are_refused_not_folded(app, call, needle):
    rejected(app, InvalidNameError, [needle, "ASCII"], call, app.publisher)


def test_kelvin_sign_in_a_spec_key_is_refused(table):
    rejected(table, InvalidSpecError, ["\u212a"], table.publisher.announce_partitions, DB, TABLE,
             [{"\u212a": "1"}])


# -- item 14: the Python API validated up front ----------------------------------
@pytest.mark.parametrize(
    ("kwargs", "exc", "needles"),
    [
        ({"partitions": ["k=1"], "locations": [123]}, ValidationError,
         ["location #0", "int", "str"]),
        ({"partitions": ["k=1"], "locations": ["/a\x00b"]}, ValidationError,
         ["location #0", "NUL"]),
        ({"partitions": ["k=1"], "locations": ["/a\ud800"]}, ValidationError,
         ["location #0", "UTF-8"]),
        ({"partitions": ["k=1"], "locations": "/x"}, ValidationError,
         ["locations", "list", "str"]),
        ({"partitions": [{"k": 10**5000}]}, InvalidSpecError, ["'k'", "digits"]),
        ({"partitions": "k=3"}, InvalidSpecError, ["partitions", "list", "str"]),
        ({"partitions": b"k=3"}, InvalidSpecError, ["partitions", "list", "bytes"]),
        ({"partitions": ["k=1"], "revision": "7"}, ValidationError, ["revision", "str"]),
    ],
)
def test_announce_rejects_up_front(table, kwargs, exc, needles):
    kwargs = dict(kwargs)
    args = kwargs.pop("partitions")
    err = rejected(table, exc, needles, table.publisher.announce_partitions, DB, TABLE, args,
                   **kwargs)
    # Ours, not pydantic's or a bare ValueError.
    assert type(err).__module__ == "partition_notify", type(err)


def test_set_done_rejects_a_huge_integer(table):
    rejected(table, InvalidSpecError, ["'k'", "digits"], table.publisher.send_mark_set_done,
             DB, TABLE, {"k": 10**5000})


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        ({"location": "/a\x00b"}, ["location", "NUL"]),
        ({"location": 5}, ["location", "int"]),
        ({"retention_seconds": 2**63}, ["retention_seconds", "at most"]),
        ({"retention_seconds": True}, ["retention_seconds", "bool"]),
        ({"retention_seconds": 0}, ["retention_seconds", "positive"]),
    ],
)
def test_register_rejects_up_front(app, kwargs, needles):
    rejected(app, ValidationError, needles, app.publisher.register_table, DB, "t2", ["k"],
             **kwargs)


def test_nul_in_a_location_is_refused_on_reregister_too(table):
    rejected(table, ValidationError, ["NUL"], table.publisher.register_table, DB, TABLE, ["k"],
             location="/x\x00")
