"""Credentials set, broker listener without SASL: say so at once (issue 10, item 15).

The suite's tansu on 127.0.0.1:9092 has no SASL listener: it answers the
SaslHandshake with UNSUPPORTED_SASL_MECHANISM. kafka-python retries that until
its bootstrap deadline and then reports "Unable to bootstrap"; we must name
the mechanism and fail well before the connect timeout.
"""

from __future__ import annotations

import time

import pytest
from partition_notify.transports.kafka import KafkaTransport

from partition_notify.core.errors import AuthenticationError
from tests.support.markers import uses
from tests.transports.kafka_helpers import envelope, kafka_spec, unique_topic

CONNECT_TIMEOUT = 10.0


@pytest.fixture
@uses("broker")
def transport():
    spec = kafka_spec()
    t = KafkaTransport.from_url(spec.url, username="pn_service", password="wrong-or-right",
                                connect_timeout=CONNECT_TIMEOUT)
    yield t
    t.close(2.0)


def test_publish_names_the_refused_mechanism_quickly(transport):
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        transport.publish([envelope(unique_topic(), 1)], timeout=CONNECT_TIMEOUT)
    took = time.monotonic() - started
    text = str(info.value)
    assert "SASL" in text and "PLAIN" in text and "UNSUPPORTED_SASL_MECHANISM" in text, text
    assert "wrong-or-right" not in text
    assert took < CONNECT_TIMEOUT / 2, f"took {took:.1f} s"


def test_subscribe_names_the_refused_mechanism_quickly(transport):
    consumer = transport.consumer(lambda raw: None)
    started = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as info:
            consumer.subscribe([unique_topic()], timeout=CONNECT_TIMEOUT)
    finally:
        consumer.close(2.0)
    assert "PLAIN" in str(info.value)
    assert time.monotonic() - started < CONNECT_TIMEOUT / 2
