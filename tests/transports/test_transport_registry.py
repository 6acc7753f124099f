"""The registry builds every transport through ``Transport.from_url``."""

from __future__ import annotations

import pytest
from partition_notify.transports import create_transport
from partition_notify.transports.base import Transport

from partition_notify.core.errors import ConfigurationError


def test_from_url_is_part_of_the_interface():
    assert "from_url" in Transport.__abstractmethods__


def test_embedded_without_a_store_says_what_it_needs():
    with pytest.raises(ConfigurationError, match="needs the store"):
        create_transport("embedded://")


@pytest.mark.parametrize(("url", "named"), [
    ("embedded://?poll=1", "query"),
    ("embedded://broker:61613", "host"),
    ("embedded:///tmp/store.db", "path"),
    ("embedded://user:secret@", "host"),
    ("embedded://#x", "fragment"),
])
def test_embedded_takes_no_host_path_or_options(tmp_path, url, named):
    # Every other transport refuses what it does not know; a silently ignored
    # ``?poll=1`` or store path would leave the user believing it applied.
    from partition_notify.app import build_app

    with pytest.raises(ConfigurationError, match=rf"embedded.*{named}") as err:
        build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url=url).close()
    assert "secret" not in str(err.value)
    assert "embedded://" in str(err.value)


def test_embedded_url_is_accepted_as_documented(tmp_path):
    from partition_notify.app import build_app

    for url in ("embedded://", "EMBEDDED://"):
        app = build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url=url)
        app.close()
