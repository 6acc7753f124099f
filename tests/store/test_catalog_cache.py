"""The catalog's table cache (store/catalog.py): never a stale table, whoever changed it.

A publish takes its table from a cache; the append reads the catalog counter
in its own transaction and refuses a draft built from an older catalog, and
the publisher then reads the table afresh. Changes come from another engine
and from another process; real SQLite files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from partition_notify.publisher import Publisher, PublisherConfig
from partition_notify.store import Store
from partition_notify.transports.embedded import EmbeddedTransport
from sqlalchemy import text

from partition_notify.core.errors import CatalogChanged, InvalidSpecError, UnknownTableError

_REREGISTER = """
import sys
from partition_notify.store import Store
store = Store.open(sys.argv[1])
store.catalog.unregister_table("db", "t")
store.catalog.register_table("db", "t", ["region"], topic="pn.db.t2", retention_seconds=60)
store.close()
"""


def _publisher(store: Store) -> Publisher:
    return Publisher(store, EmbeddedTransport(store), PublisherConfig())


def _logged(store: Store) -> list[tuple[int, str]]:
    with store.engine.connect() as conn:
        return [(int(r[0]), str(r[1])) for r in conn.execute(
            text("SELECT table_id, topic FROM pn_events ORDER BY event_id"))]


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Store, Store, str]:
    url = f"sqlite:///{tmp_path / 's.db'}"
    a, b = Store.open(url), Store.open(url)
    a.catalog.register_table("db", "t", ["d"], topic="pn.db.t", retention_seconds=3600)
    return a, b, url


def test_a_table_registered_again_in_another_process_is_read_afresh(
        stores: tuple[Store, Store, str]) -> None:
    a, b, url = stores
    pub = _publisher(a)
    pub.send_mark_set_done("db", "t", "d=1")  # the cache holds db.t with keys [d]
    cached, _, hit = a.catalog.cached_table("db", "t")
    assert hit, "the first publish cached the table"
    old_id = cached.id
    subprocess.run([sys.executable, "-c", _REREGISTER, url], check=True, timeout=60)
    msg = pub.send_mark_set_done("db", "t", "region=eu")
    new = a.catalog.get_table("db", "t")
    assert new.partition_keys == ("region",)  # (SQLite may hand out the same id again)
    assert msg.topic == "pn.db.t2"
    assert _logged(a) == [(old_id, "pn.db.t"), (new.id, "pn.db.t2")]
    with pytest.raises(InvalidSpecError):  # validated against the table as it is now
        pub.send_mark_set_done("db", "t", "d=2")
    a.close()
    b.close()


def test_an_unregistered_table_is_not_published_to(stores: tuple[Store, Store, str]) -> None:
    a, b, _ = stores
    pub = _publisher(a)
    pub.send_mark_set_done("db", "t", "d=1")
    b.catalog.unregister_table("db", "t")  # another engine: a's cache still has the table
    with pytest.raises(UnknownTableError):
        pub.send_mark_set_done("db", "t", "d=2")
    assert len(_logged(a)) == 1
    a.close()
    b.close()


def test_a_stale_draft_is_refused_in_the_append_and_nothing_is_logged(
        stores: tuple[Store, Store, str]) -> None:
    a, b, _ = stores
    pub = _publisher(a)
    info, version, _ = a.catalog.cached_table("db", "t")
    assert version is not None
    b.catalog.set_retention("db", "t", 7200)  # any catalog write advances the counter
    with pytest.raises(CatalogChanged):
        pub._set_done(info, version, "d=1", None, None, None)
    assert _logged(a) == []
    msg = pub.send_mark_set_done("db", "t", "d=1")  # read afresh: the new retention
    assert msg.expires_at == msg.timestamp + 7200
    a.close()
    b.close()


def test_a_stale_draft_is_refused_when_no_counter_exists_yet(
        stores: tuple[Store, Store, str]) -> None:
    # The append reads the catalog counter in the statement that reads the counters it
    # advanced; with none of those there (the seeded "event" row gone, no topic yet) it
    # still reads it, and creates both counters.
    a, b, _ = stores
    with a.engine.begin() as conn:
        conn.execute(text("DELETE FROM pn_sequence WHERE name = 'event'"))
    pub = _publisher(a)
    info, version, _ = a.catalog.cached_table("db", "t")
    assert version is not None
    b.catalog.set_retention("db", "t", 7200)
    with pytest.raises(CatalogChanged):
        pub._set_done(info, version, "d=1", None, None, None)
    assert _logged(a) == []
    msg = pub.send_mark_set_done("db", "t", "d=1")
    assert (msg.event_id, msg.topic_seq, msg.expires_at) == (1, 1, msg.timestamp + 7200)
    a.close()
    b.close()
