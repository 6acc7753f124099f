"""The writer role docs/security.md gives (its ``sql`` block under "The store"), run as
written on a real PostgreSQL: a publisher signed in as that role registers, announces,
marks done (also with idempotency keys, replayed) and withdraws. The prose list it
replaces (INSERT/UPDATE on five tables) could do none of that: no SELECT, no sequence
use for the ids, no pn_idempotency."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from partition_notify.app import build_app
from partition_notify.core.errors import StoreError
from tests.support.ci import require
from tests.support.postgres import PostgresDatabases

ROOT = Path(__file__).resolve().parents[2]


def _documented_sql() -> str:
    store = (ROOT / "docs" / "security.md").read_text().split("## The store", 1)[1]
    blocks = re.findall(r"```sql\n(.*?)```", store.split("\n## ", 1)[0], re.DOTALL)
    assert blocks, "docs/security.md gives no runnable writer role (a ```sql block)"
    return str(blocks[0])


@pytest.fixture
def writer_url(postgres: PostgresDatabases | None) -> Iterator[tuple[str, str]]:
    """(owner URL, writer URL) of a fresh migrated database; the role is this test's own
    (roles are cluster-wide), dropped afterwards."""
    require(postgres is not None, "PostgreSQL is not reachable")
    assert postgres is not None
    url = postgres.new()
    role = f"pn_writer_{uuid.uuid4().hex[:8]}"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(_documented_sql().replace("pn_writer", role)))
        yield url, make_url(url).set(username=role).render_as_string(hide_password=False)
    finally:
        engine.dispose()
        postgres.drop(url)
        with postgres.admin.connect() as conn:
            conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))


def test_the_documented_writer_role_writes(writer_url: tuple[str, str]) -> None:
    _, url = writer_url
    with build_app(store_url=url, transport_url="embedded://") as app:
        pub = app.publisher
        pub.register_table("sales", "orders", ["ds", "region"], retention_seconds=600)
        pub.announce_partitions("sales", "orders", ["ds=1/region=us"])
        first = pub.send_mark_set_done("sales", "orders", "ds=1", idempotency_key="k1")
        again = pub.send_mark_set_done("sales", "orders", "ds=1", idempotency_key="k1")
        assert again.event_id == first.event_id  # replayed from pn_idempotency
        withdrawn = pub.withdraw("sales", "orders", "ds=1/region=us", reason="bad data")
        assert [s.event_id for s in withdrawn.set_dones] == [first.event_id]
        with app.subscriber() as sub:
            assert not sub.is_partition_present("sales", "orders", "ds=1/region=us")


def test_the_documented_writer_role_is_no_owner(writer_url: tuple[str, str]) -> None:
    _, url = writer_url
    with build_app(store_url=url, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["ds"])
        with pytest.raises(StoreError, match="permission denied"):
            app.rules.add("sales.orders", name="r", kind="quiet",
                          params={"by": ["ds"], "quietSeconds": 60})
