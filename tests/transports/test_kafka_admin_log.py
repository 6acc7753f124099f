"""kafka-python logs its admin client configuration at DEBUG; never with our password."""

from __future__ import annotations

import logging
import time

import pytest
from partition_notify.transports.kafka._topics import TopicAdmin
from partition_notify.transports.kafka.config import parse_url

from tests.transports.kafka_helpers import kafka_spec, unique_topic

SECRET = "admin-log-s3cret"


@pytest.mark.broker  # asks for the broker itself, not through a fixture
def test_admin_client_configuration_is_not_logged(caplog):
    endpoint = parse_url(kafka_spec().url, username="pn_service", password=SECRET,
                         connect_timeout=2.0)
    caplog.set_level(logging.DEBUG)
    TopicAdmin(endpoint).ensure([unique_topic()], time.monotonic() + 2.0)
    assert any(r.name.startswith("kafka") for r in caplog.records), "the driver logged nothing"
    assert SECRET not in caplog.text
