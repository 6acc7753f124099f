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
