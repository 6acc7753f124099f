"""One host-list parser for stomp:// and kafka:// URLs."""

from __future__ import annotations

import pytest
from partition_notify.transports.hosts import parse_hosts
from partition_notify.transports.kafka.config import parse_url as kafka_url
from partition_notify.transports.stomp.transport import parse_url as stomp_url

from partition_notify.core.errors import ConfigurationError


def test_ports_defaults_and_ipv6():
    assert parse_hosts("a:1,b,[::1]:2,[fe80::1]", default_port=9, kind="X", example="x://h") == (
        ("a", 1), ("b", 9), ("::1", 2), ("fe80::1", 9))


@pytest.mark.parametrize(("hostlist", "message"), [
    ("", "X URL names no host; expected x://h:9"),
    (",", "names no host"),
    ("h:port", "X URL host 'h:port': port 'port' is not a number"),
    (":80", "X URL host ':80' has no host name"),
    ("h:0", "port 0 is not in 1-65535"),
    ("h:70000", "port 70000 is not in 1-65535"),
    ("::1", "an IPv6 address goes in brackets"),
    ("[::1", "expected [IPv6 address]:port"),
    ("[::1]9", "expected [IPv6 address]:port"),
    ("[]:80", "has no host name"),
])
def test_bad_host_lists_say_which_item_and_what_is_expected(hostlist, message):
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_hosts(hostlist, default_port=9, kind="X", example="x://h:9")


def test_both_transports_use_it_with_their_own_defaults():
    assert stomp_url("stomp://a,[::1]").hosts == (("a", 61613), ("::1", 61613))
    assert stomp_url("stomp+ssl://a").hosts == (("a", 61614),)
    assert kafka_url("kafka://a,[::1]").bootstrap == ("a:9092", "[::1]:9092")
    for url in ("stomp://h:99999", "kafka://h:99999"):
        with pytest.raises(ConfigurationError, match="not in 1-65535"):
            stomp_url(url) if url.startswith("stomp") else kafka_url(url)
