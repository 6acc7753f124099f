"""SQLite commits are durable at commit by default (issue 10, item 18).

WAL with ``synchronous=NORMAL`` may lose the last commits on power loss;
``FULL`` fsyncs the WAL at every commit. The default is FULL, the setting
``PN_SQLITE_SYNCHRONOUS`` trades it for speed on purpose.
"""

from __future__ import annotations

import pytest
from partition_notify.store import Store
from sqlalchemy import text

from partition_notify.app import build_app
from partition_notify.core.errors import ConfigurationError
from partition_notify.settings import load_settings

LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}


def _pragma(store: Store, name: str) -> object:
    with store.engine.connect() as conn:
        return conn.execute(text(f"PRAGMA {name}")).scalar()


def test_default_is_full_in_wal_mode(sqlite_url):
    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        assert _pragma(app.store, "journal_mode") == "wal"
        assert _pragma(app.store, "synchronous") == LEVELS["FULL"]


@pytest.mark.parametrize("level", ["NORMAL", "extra", "FULL"])
def test_the_setting_chooses_the_level(sqlite_url, monkeypatch, level):
    monkeypatch.setenv("PN_SQLITE_SYNCHRONOUS", level)
    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        assert _pragma(app.store, "synchronous") == LEVELS[level.upper()]


def test_an_unknown_level_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("PN_SQLITE_SYNCHRONOUS", "sometimes")
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert "PN_SQLITE_SYNCHRONOUS" in str(info.value) and "'sometimes'" in str(info.value)


def test_store_open_defaults_to_full(sqlite_url):
    store = Store.open(sqlite_url)
    try:
        assert _pragma(store, "synchronous") == LEVELS["FULL"]
    finally:
        store.close()


def test_settings_offer_the_levels_the_engine_accepts():
    from partition_notify.store.engine import DEFAULT_SQLITE_SYNCHRONOUS, SQLITE_SYNCHRONOUS_LEVELS

    from partition_notify.settings import SQLITE_LEVELS, Settings

    assert SQLITE_LEVELS == SQLITE_SYNCHRONOUS_LEVELS
    assert Settings.model_fields["sqlite_synchronous"].default == DEFAULT_SQLITE_SYNCHRONOUS
