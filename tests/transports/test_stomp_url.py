"""stomp:// URLs: hosts, vhost, TLS, credentials, and clear errors."""

from __future__ import annotations

import pytest
from partition_notify.transports import resolve
from partition_notify.transports.stomp import StompTransport, parse_url

from partition_notify.core.errors import ConfigurationError


def test_plain_url_defaults():
    ep = parse_url("stomp://broker.example:61613")
    assert ep.hosts == (("broker.example", 61613),)
    assert ep.vhost == "/" and not ep.use_ssl and ep.username is None
    assert ep.heartbeat_ms == 5000


def test_failover_hosts_vhost_and_default_port():
    ep = parse_url("stomp://a:1111,b,[::1]:2222/prod")
    assert ep.hosts == (("a", 1111), ("b", 61613), ("::1", 2222))
    assert ep.vhost == "prod"
    assert ep.where == "stomp://a:1111,b:61613,::1:2222"


def test_ssl_scheme_and_ca_file():
    ep = parse_url("stomp+ssl://mq:61617?ca_certs=/etc/ca.pem")
    assert ep.use_ssl and ep.ca_certs == "/etc/ca.pem"
    assert parse_url("stomp+ssl://mq").hosts == (("mq", 61614),)
    assert resolve("stomp+ssl://mq") is StompTransport


def test_explicit_credentials_win_over_the_url_and_never_show():
    ep = parse_url("stomp://u1:p%401@mq", username="u2", password="s3cret")
    assert (ep.username, ep.password) == ("u2", "s3cret")
    assert "s3cret" not in repr(ep) and "s3cret" not in ep.where
    url_only = parse_url("stomp://u1:p%401@mq")
    assert (url_only.username, url_only.password) == ("u1", "p@1")
    assert "p@1" not in url_only.where


@pytest.mark.parametrize(("url", "match"), [
    ("stomp://mq:abc", "port 'abc' is not a number"),
    ("stomp://", "names no host"),
    ("stomp://mq?heartbeat=1", "unknown parameter"),
    ("amqp://mq", "stomp:// or stomp\\+ssl://"),
])
def test_bad_urls_say_what_is_wrong(url, match):
    with pytest.raises(ConfigurationError, match=match):
        parse_url(url)


def test_from_url_ignores_options_for_other_transports():
    t = StompTransport.from_url("stomp://mq", store=object(), poll_interval_seconds=1,
                                heartbeat_ms=0, connect_timeout=3)
    assert t.endpoint.heartbeat_ms == 0 and t.endpoint.connect_timeout == 3
    assert t.link.connects == 0, "from_url does not connect"
