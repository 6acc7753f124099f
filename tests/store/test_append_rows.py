"""store/append_rows.py: the rows an append writes are made when read (RowsView), from
the drafts, messages and envelopes it kept; they must be the rows it wrote when it kept
a dict per row."""

from __future__ import annotations

import time

import pytest
from partition_notify.publisher.templates import PartitionTemplate
from partition_notify.store import TableInfo
from partition_notify.store.append_rows import Rows, RowsView

INFO = TableInfo(3, "sales", "orders", ("ds", "region"), "hcat.sales.orders", 3600)
FIXED = {"server": "s", "servicePrincipal": "", "db": INFO.db, "table": INFO.name,
         "topic": INFO.topic, "revision": 4, "partitionKeys": list(INFO.partition_keys)}


def test_rows_view_indexes_slices_and_ends_an_iteration() -> None:
    view = RowsView([5, 7, 9], lambda i: {"i": i})
    assert len(view) == 3 and view[0] == {"i": 5} and view[-1] == {"i": 9}
    assert view[1:] == [{"i": 7}, {"i": 9}]
    assert list(view) == [{"i": 5}, {"i": 7}, {"i": 9}]
    with pytest.raises(IndexError):
        view[3]


@pytest.mark.parametrize("published", [False, True])
def test_rows_are_each_events_and_each_new_partitions(published: bool) -> None:
    template = PartitionTemplate(INFO, FIXED)
    specs = ["ds=1/region=a", "ds=1/region=b", "ds=2/region=a"]
    drafts = [template.draft(s, {"ds": s[3], "region": s[-1]}, f"/x/{i}" if i else None)[0]
              for i, s in enumerate(specs)]
    now = time.time()
    seqs = {INFO.topic: 40}
    # The second partition exists: replaced (an overwrite), no new row.
    rows = Rows.of(drafts, 100, seqs, now, {INFO.id: {specs[1]}}, published)
    assert seqs == {INFO.topic: 43}
    assert [m.event_id for m in rows.messages] == [100, 101, 102]
    assert rows.messages[1].replace is True  # type: ignore[union-attr]
    assert list(rows.events) == [
        {"event_id": 100 + i, "topic": INFO.topic, "topic_seq": 40 + i,
         "event_type": "ADD_PARTITION", "table_id": INFO.id,
         "message_id": rows.messages[i].message_id,
         "body": rows.envelopes[i].body.decode(), "created_at": now,
         "published_at": now if published else None, "attempts": 0} for i in range(3)]
    assert list(rows.parts) == [
        {"table_id": INFO.id, "spec": specs[i], "location": drafts[i].location,
         "revision": 4, "event_id": 100 + i, "created_at": now} for i in (0, 2)]
    assert rows.part_values == [drafts[0].partition_values, drafts[2].partition_values]
    assert [(t, s) for t, s, _ in rows.replaced] == [(INFO.id, specs[1])]
    events_json, parts_json = rows.json()
    assert len(events_json["headers"][0]) == 3 and len(parts_json["values"][0]) == 2
