"""A store taken down to an older migration and up again, for the upgrade tests.

The real migrations (store/migrations, Alembic) on the test's store: ``downgrade`` to a
revision inside one transaction that the test uses to write rows as that revision had
them, then :func:`partition_notify.store.migrate.migrate` to head, what the next start
of anything on the store does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from alembic import command
from alembic.config import Config
from partition_notify.store.migrate import _SCRIPTS, migrate
from sqlalchemy import Connection, create_engine


@contextlib.contextmanager
def downgraded(store_url: str, revision: str) -> Iterator[Connection]:
    """The store at ``store_url`` at migration ``revision``: the block gets the connection
    of the downgrade's transaction (committed when it ends); then the store is upgraded
    to head. A block that raises rolls the downgrade back and upgrades nothing."""
    engine = create_engine(store_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(_SCRIPTS))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, revision)
            yield conn
        migrate(engine)
    finally:
        engine.dispose()
