"""The composition root builds the revision manager, the datasets and the relay once."""

from __future__ import annotations

from pathlib import Path

import pytest
from partition_notify.writers import NotifyingWriter

from partition_notify.app import build_app
from partition_notify.core.errors import ConfigurationError


def test_writers_and_datasets_use_the_apps_manager_on_the_stores_clock(tmp_path: Path) -> None:
    with build_app(store_url=f"sqlite:///{tmp_path}/store.db",
                   transport_url="embedded://") as app:
        assert app.revisions.clock is app.store.clock
        assert app.datasets.revisions is app.revisions
        assert app.relay is app.relay, "one relay per App"
        location = str(tmp_path / "orders")
        writer = NotifyingWriter(app, "sales", "orders", partition_keys=["d"], location=location)
        assert writer.revisions is app.revisions
        # A bare Publisher has no manager: it must be handed one, never build its own.
        with pytest.raises(ConfigurationError, match="revisions="):
            NotifyingWriter(app.publisher, "sales", "orders")
        explicit = NotifyingWriter(app.publisher, "sales", "orders", revisions=app.revisions)
        assert explicit.revisions is app.revisions
        assert NotifyingWriter(app.publisher, "sales", "orders",
                               transactional=False).revisions is None
