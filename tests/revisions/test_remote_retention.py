"""serve leaves the retired files of a table it cannot reach to the Spark job that can.

Defect (found in session 23): for a table on ``hdfs://`` (``s3a://``, ...) ``serve``'s
housekeeping marked an overwrite's retired files dealt with, deleting nothing, so
no later pass (nor ``vacuum_retired`` from a Spark job, tests/spark/test_vacuum_hadoop.py)
would ever delete them. Now their rows stay as they are, and serve's passes do not
read them. Real SQLite and PostgreSQL, the injected clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from partition_notify.revisions.files import RevisionFiles
from partition_notify.store.migrate import _SCRIPTS, migrate
from sqlalchemy import create_engine, text

from partition_notify.app import App
from partition_notify.core.limits import RETIRED_FILE_RETENTION_SECONDS
from partition_notify.serve.housekeeping import purge_all
from tests.support.clock import FakeClock, app_on_clock
from tests.support.migrations import downgraded

T = "sales.orders"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


app = pytest.fixture(name="app")(app_on_clock)


def _unvacuumed(app: App) -> int:
    with app.store.engine.connect() as conn:
        return int(conn.execute(text(
            "SELECT count(*) FROM pn_revision_replacements WHERE vacuumed_at IS NULL"
        )).scalar() or 0)


def test_an_overwrite_on_hdfs_is_left_for_the_spark_job(app: App, clock: FakeClock) -> None:
    app.publisher.register_table("sales", "orders", ["ds"], location="hdfs://nn/wh/orders")
    _overwrite(app, T)

    clock.advance(RETIRED_FILE_RETENTION_SECONDS + 1)
    for _ in range(2):
        assert purge_all(app, 10, None).revision_files == 0
        assert _unvacuumed(app) == 1, "still to be dealt with, by the job that can"


def _overwrite(app: App, db_table: str) -> None:
    """w1's file of ds=1, retired by w2's committed overwrite."""
    rm, files = app.revisions, RevisionFiles(app.revisions)
    first = rm.begin_write_transaction(db_table, ["data"])
    files.record(db_table, first.revision, "w1", lambda: ["ds=1/part-w1.parquet"])
    rm.commit_write_transaction(first)
    second = rm.begin_write_transaction(db_table, ["data"])
    files.retire(db_table, second.revision, "w2", ["ds=1"], "_pn_retired/w2")
    files.record(db_table, second.revision, "w2", lambda: ["ds=1/part-w2.parquet"])
    rm.commit_write_transaction(second)


def test_migration_0020_reopens_remote_overwrites_an_older_serve_marked_vacuumed(
        app: App, store_url: str, tmp_path: Path) -> None:
    """Before session 23 serve marked a remote table's overwrites dealt with, deleting
    nothing: those rows (files not removed) are reopened for ``vacuum_retired``."""
    pub = app.publisher
    pub.register_table("sales", "orders", ["ds"], location="hdfs://nn/wh/orders")
    pub.register_table("sales", "returns", ["ds"], location="s3a://bucket/wh/returns")
    pub.register_table("sales", "local", ["ds"], location=str(tmp_path / "local"))
    pub.register_table("sales", "gone", ["ds"], location="hdfs://nn/wh/gone")
    for name in ("orders", "returns", "local", "gone"):
        _overwrite(app, f"sales.{name}")
    with downgraded(store_url, "0019") as conn:
        # What the older serve did: every overwrite past retention marked dealt
        # with; it deleted the local table's file, the job later sales.gone's.
        conn.execute(text("UPDATE pn_revision_replacements SET vacuumed_at = 5.0"))
        conn.execute(text("UPDATE pn_revision_files SET removed_at = 5.0 WHERE "
                          "table_name IN ('sales.local', 'sales.gone') "
                          "AND write_id = 'w1'"))
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            reopened = sorted(conn.execute(text(
                "SELECT table_name FROM pn_revision_replacements WHERE vacuumed_at IS NULL"
            )).scalars())
    finally:
        engine.dispose()
    assert reopened == ["sales.orders", "sales.returns"]


def test_migration_0022_reopens_what_0020_could_not_see(
        app: App, clock: FakeClock, store_url: str, tmp_path: Path) -> None:
    """Defect (session 26): 0020 reopened only tables whose *current* location has a
    scheme. A schemeless location on ``PN_DEFAULT_FS`` (the setting is not known to a
    migration: any process opening the store may run it) and a table whose location
    changed since (an older serve saw the old one) kept their retired files for ever.
    0022 reopens every such overwrite still naming a retired file neither removed nor
    given up, whatever the location: whoever deletes there now (serve, for a local
    one, deleting inside the location only; the Spark job elsewhere) takes it."""
    pub = app.publisher
    local = tmp_path / "moved"
    pub.register_table("sales", "orders", ["ds"], location="/wh/orders")  # on PN_DEFAULT_FS
    pub.register_table("sales", "moved", ["ds"], location=str(local))  # once hdfs://
    for name in ("orders", "moved"):
        _overwrite(app, f"sales.{name}")
    retired = local / "ds=1" / "_pn_retired" / "w2" / "part-w1.parquet"
    retired.parent.mkdir(parents=True)
    retired.write_bytes(b"PAR1 w1")
    engine = create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0019")
            conn.execute(text("UPDATE pn_revision_replacements SET vacuumed_at = 5.0"))
            command.upgrade(cfg, "0020")
        assert _unvacuumed(app) == 0, "0020 sees neither"
        migrate(engine)
    finally:
        engine.dispose()
    assert _unvacuumed(app) == 2
    clock.advance(RETIRED_FILE_RETENTION_SECONDS + 1)
    assert purge_all(app, 10, None).revision_files == 1
    assert not retired.exists(), "serve deleted the moved table's retired file"
