"""publisher/templates.py: a table's add-partition messages copied from one validated
message, their bodies spliced from its JSON. Each must equal, byte for byte, what the
model itself validates and encodes, and the size check must measure what it did."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from partition_notify.publisher.templates import WIDEST_ID, PartitionTemplate, SetDoneTemplate
from partition_notify.store import EventDraft, TableInfo

from partition_notify.app import build_app
from partition_notify.contract import (
    AddPartitionMessage,
    Envelope,
    SetDoneMessage,
    spec,
    to_envelope,
)
from partition_notify.contract.messages import encode_body

INFO = TableInfo(7, "sales", "orders", ("ds", "region"), "hcat.sales.orders", 3600)
# Every kind of character JSON escapes or a splice could trip on.
TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
               min_size=1, max_size=40)


def _fixed(revision: int | None) -> dict[str, object]:
    return {"server": "pn \"srv\" 100%s%%", "servicePrincipal": "svc/é@REALM", "db": INFO.db,
            "table": INFO.name, "topic": INFO.topic, "revision": revision,
            "partitionKeys": list(INFO.partition_keys)}


@settings(max_examples=300, deadline=None)
@given(ds=TEXT, region=TEXT, location=st.none() | TEXT,
       revision=st.none() | st.integers(0, 2**63 - 1), event_id=st.integers(1, 2**63 - 1),
       seq=st.integers(1, 2**63 - 1), replace=st.booleans())
def test_spliced_body_and_message_equal_the_validated_model(
        ds: str, region: str, location: str | None, revision: int | None, event_id: int,
        seq: int, replace: bool) -> None:
    template = PartitionTemplate(INFO, _fixed(revision))
    assert template.exact
    ordered = {"ds": ds, "region": region}
    draft, size = template.draft("spec", ordered, location)
    now = time.time()
    msg = draft.message(event_id, seq, now)
    if replace:
        msg = msg.model_copy(update={"replace": True})
    expected = AddPartitionMessage.model_validate({
        **_fixed(revision), "timestamp": int(now), "timestampMs": int(now * 1000),
        "messageId": msg.message_id, "eventId": event_id, "topicSeq": seq,
        "partitions": [ordered], "locations": [location], "replace": True if replace else None})
    assert msg == expected
    assert draft.encode is not None
    env = draft.encode(msg)
    assert env == to_envelope(expected)
    assert env.body == encode_body(expected)
    widest = draft.message(WIDEST_ID, WIDEST_ID, now)
    assert size == len(encode_body(widest))
    _same_as_model_copy(template.message, msg)
    _json_texts_are_json_dumps(draft, env, ordered)


def _same_as_model_copy(message: object, msg: object) -> None:
    """A template's copy is what pydantic's model_copy makes with the same update."""
    assert isinstance(message, AddPartitionMessage | SetDoneMessage)
    assert type(msg) is type(message)
    fields = {k: v for k, v in vars(msg).items() if v != getattr(message, k)}
    copied = message.model_copy(update=fields)
    assert copied == msg and vars(copied) == vars(msg)
    assert copied.__pydantic_fields_set__ == msg.__pydantic_fields_set__  # type: ignore[attr-defined]
    assert msg.__pydantic_fields_set__ is not message.__pydantic_fields_set__  # type: ignore[attr-defined]
    assert (msg.__pydantic_extra__, msg.__pydantic_private__) == (None, None)  # type: ignore[attr-defined]


def _json_texts_are_json_dumps(draft: EventDraft, env: Envelope,
                               ordered: dict[str, str] | None) -> None:
    """The texts a draft hands the SQLite append are json.dumps' (and made when they can)."""
    assert draft.headers_json is not None
    assert draft.headers_json(env) == json.dumps(env.headers)
    if ordered is None:
        return
    plain = all(" " <= c <= "~" and c not in '"\\' for v in ordered.values() for c in v)
    assert draft.values_json == (json.dumps(ordered) if plain else None)


def test_messages_do_not_share_their_lists() -> None:
    template = PartitionTemplate(INFO, _fixed(None))
    a = template.draft("a", {"ds": "1", "region": "x"}, None)[0].message(1, 1, 1.0)
    b = template.draft("b", {"ds": "2", "region": "x"}, None)[0].message(2, 2, 1.0)
    assert isinstance(a, AddPartitionMessage) and isinstance(b, AddPartitionMessage)
    assert a.partition_keys == b.partition_keys and a.partition_keys is not b.partition_keys
    assert a.partitions != b.partitions


def test_announced_bodies_are_the_models_encoding(tmp_path: Path) -> None:
    """End to end: what the log holds is what the model encodes."""
    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds", "part"])
        specs = [{"ds": "2024-01-01", "part": f"p{i}\u00e9\"\\\u2028/"} for i in range(20)]
        sent = app.publisher.announce_partitions(
            "db", "t", specs, locations=[None if i % 2 else f"/x/{i}" for i in range(20)])
        again = app.publisher.announce_partitions("db", "t", specs[:3], replace=True)
        logged = {e.event_id: e.body for e in app.store.log.events_after(0)}
        for msg in [*sent, *again]:
            assert logged[msg.event_id] == encode_body(msg).decode()
        assert all(m.replace for m in again) and not any(m.replace for m in sent)
        _rows_hold_json_dumps(tmp_path / "s.db")


def _rows_hold_json_dumps(path: Path) -> None:
    """The log's JSON columns hold what json.dumps (SQLAlchemy's JSON type) writes,
    whether the template spliced the text or the append serialised it."""
    db = sqlite3.connect(path)
    try:
        headers = db.execute("SELECT headers FROM pn_events").fetchall()
        values = db.execute('SELECT "values" FROM pn_partitions').fetchall()
    finally:
        db.close()
    assert headers and values
    for (text,) in [*headers, *values]:
        assert text == json.dumps(json.loads(text))


def test_batch_message_ids_are_distinct_uuid7(tmp_path: Path) -> None:
    import uuid

    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds"])
        sent = app.publisher.announce_partitions("db", "t", [{"ds": str(i)} for i in range(300)])
        ids = [m.message_id for m in sent]
        assert len(set(ids)) == 300
        assert all(uuid.UUID(hex=i).version == 7 and uuid.UUID(hex=i).hex == i for i in ids)
        _rows_hold_json_dumps(tmp_path / "s.db")


@settings(max_examples=300, deadline=None)
@given(ds=TEXT, region=st.none() | TEXT, revision=st.none() | st.integers(0, 2**63 - 1),
       event_id=st.integers(1, 2**63 - 1), seq=st.integers(1, 2**63 - 1),
       retention=st.integers(1, 10**9))
def test_set_done_splice_equals_the_validated_model(
        ds: str, region: str | None, revision: int | None, event_id: int, seq: int,
        retention: int) -> None:
    info = TableInfo(7, "sales", "orders", ("ds", "region"), "hcat.sales.orders", retention)
    fixed = {k: v for k, v in _fixed(revision).items() if k != "partitionKeys"}
    template = SetDoneTemplate(info, fixed)
    assert template.exact
    s = spec.normalize({"ds": ds} if region is None else {"ds": ds, "region": region})
    canon = spec.canonical_normal(s)
    draft, size = template.draft(s, canon)
    now = time.time()
    msg = draft.message(event_id, seq, now)
    expected = SetDoneMessage.model_validate({
        **fixed, "timestamp": int(now), "timestampMs": int(now * 1000),
        "messageId": msg.message_id, "eventId": event_id, "topicSeq": seq,
        "partitionSpec": s, "partitionSpecString": canon,
        "expiresAt": int(now + retention)})
    assert msg == expected
    assert draft.encode is not None and draft.encode(msg) == to_envelope(expected)
    assert size == len(encode_body(draft.message(WIDEST_ID, WIDEST_ID, now)))
    _same_as_model_copy(template.message, msg)
    _json_texts_are_json_dumps(draft, draft.encode(msg), None)


def test_set_done_templates_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A writer may use a new revision per set-done (a Spark commit's time): the
    # per-(table, revision) cache must not grow with them.
    import partition_notify.publisher.publisher as publisher_module

    limit = 3
    monkeypatch.setattr(publisher_module, "MAX_TEMPLATES", limit)
    with build_app(store_url=f"sqlite:///{tmp_path / 's.db'}",
                   transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["ds"])
        sizes = []
        for revision in range(1, 3 * limit + 1):
            app.publisher.send_mark_set_done("sales", "orders", f"ds={revision}",
                                             revision=revision)
            sizes.append(len(app.publisher._done_templates))  # type: ignore[attr-defined]
        assert max(sizes) <= limit
        assert sizes[:limit] == list(range(1, limit + 1))


def test_log_rows_hold_each_messages_headers_and_values(store_url: str) -> None:
    """On either store, every logged row's JSON columns are its message's: the headers
    its envelope carries, the values it announced (spliced text or serialised)."""
    from sqlalchemy import text

    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds", "part"])
        specs = [{"ds": "2024-01-01", "part": p} for p in ("plain", "quo\"te", "é", "a\\b")]
        sent: list[object] = [*app.publisher.announce_partitions("db", "t", specs),
                              *app.publisher.announce_partitions("db", "t", specs[:2],
                                                                 replace=True)]
        sent.append(app.publisher.send_mark_set_done("db", "t", "ds=2024-01-01"))
        with app.store.engine.connect() as conn:
            headers = dict(conn.execute(text("SELECT event_id, headers FROM pn_events")).all())
            values = dict(conn.execute(text('SELECT spec, "values" FROM pn_partitions')).all())
    assert len(headers) == len(sent) == 7
    for msg in sent:
        assert isinstance(msg, AddPartitionMessage | SetDoneMessage)
        stored = headers[msg.event_id]
        assert (json.loads(stored) if isinstance(stored, str) else stored) == \
            to_envelope(msg).headers
    assert len(values) == 4
    for s in specs:
        stored = values[spec.canonical(s)]
        assert (json.loads(stored) if isinstance(stored, str) else stored) == s


def test_partitions_are_in_the_tables_key_order_when_its_keys_are_not_sorted(
        tmp_path: Path) -> None:
    """A normalised spec is key-sorted; the draft reorders it only for unsorted keys."""
    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        for name, keys in (("unsorted", ["zone", "ds"]), ("sorted", ["ds", "zone"])):
            app.publisher.register_table("db", name, keys)
            sent = app.publisher.announce_partitions("db", name, [{"ds": "1", "zone": "a"},
                                                                 "zone=b/ds=2"])
            assert [list(m.partitions[0]) for m in sent] == [keys, keys]
            assert sent[1].partitions == [{"zone": "b", "ds": "2"}]
            logged = {e.event_id: e.body for e in app.store.log.events_after(0)}
            assert all(logged[m.event_id] == encode_body(m).decode() for m in sent)
        _rows_hold_json_dumps(tmp_path / "s.db")
