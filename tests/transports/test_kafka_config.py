"""kafka:// URL parsing (no broker needed)."""

from __future__ import annotations

import pytest
from partition_notify.transports import resolve
from partition_notify.transports.kafka.config import parse_url

from partition_notify.core.errors import ConfigurationError


def test_hosts_ports_and_defaults():
    ep = parse_url("kafka://a:9093,b,[::1]:19092")
    assert ep.bootstrap == ("a:9093", "b:9092", "[::1]:19092")
    assert ep.api_version is None and ep.group_id is None and ep.fetch_max_wait_ms == 500
    assert ep.create_topics and ep.partitions == 1 and ep.replication_factor == -1
    config = ep.client_config()
    assert config["security_protocol"] == "PLAINTEXT"
    assert "api_version" not in config and "sasl_plain_password" not in config


def test_options():
    ep = parse_url("kafka://h:1?api_version=2.8&group_id=sched&session_timeout_ms=6000"
                   "&fetch_max_wait_ms=20"
                   "&auto_offset_reset=earliest&create_topics=false&partitions=3"
                   "&replication_factor=2")
    assert ep.api_version == (2, 8)
    assert ep.client_config()["api_version"] == (2, 8)
    assert (ep.group_id, ep.session_timeout_ms, ep.auto_offset_reset) == \
        ("sched", 6000, "earliest")
    assert (ep.create_topics, ep.partitions, ep.replication_factor) == (False, 3, 2)
    assert ep.fetch_max_wait_ms == 20


def test_sasl_plain_when_a_username_is_given_and_the_password_stays_out_of_repr(tmp_path):
    ep = parse_url("kafka://h:9092", username="svc", password="s3cret-value")
    config = ep.client_config()
    assert config["security_protocol"] == "SASL_PLAINTEXT"
    assert config["sasl_mechanism"] == "PLAIN"
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == \
        ("svc", "s3cret-value")
    assert "s3cret-value" not in repr(ep)
    ca = tmp_path / "ca.pem"  # parse_url checks that the CA bundle can be read
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    url_creds = parse_url("kafka://u%40x:p%3Aw@h?security_protocol=sasl_ssl"
                          f"&sasl_mechanism=scram-sha-512&ssl_cafile={ca}")
    assert (url_creds.username, url_creds.password) == ("u@x", "p:w")
    assert url_creds.client_config()["security_protocol"] == "SASL_SSL"
    assert url_creds.client_config()["sasl_mechanism"] == "SCRAM-SHA-512"
    assert url_creds.client_config()["ssl_cafile"] == str(ca)


@pytest.mark.parametrize(("url", "message"), [
    ("kafka://", "names no host"),
    ("kafka://h:port", "not a number"),
    ("kafka://h?api_version=two", "api_version"),
    ("kafka://h?partitions=0", "option partitions='0': expected an integer >= 1"),
    ("kafka://h?replication_factor=0", "replication_factor"),
    ("kafka://h?create_topics=maybe", "true or false"),
    ("kafka://h?auto_offset_reset=middle", "latest, earliest"),
    ("kafka://h?security_protocol=SASL_SSL", "needs a username and password"),
    ("kafka://h?grup_id=x", "unknown option"),
    ("stomp://h", "must start with kafka://"),
])
def test_bad_urls_say_what_is_wrong(url, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_url(url)


def test_registry_resolves_the_scheme():
    from partition_notify.transports.kafka import KafkaTransport

    assert resolve("kafka://h:9092") is KafkaTransport


@pytest.mark.parametrize(("query", "message"), [
    ("api_version=two", "option api_version='two': expected 'auto' or a version like 2.8"),
    ("fetch_max_wait_ms=soon", "option fetch_max_wait_ms='soon': expected an integer"),
    ("fetch_max_wait_ms=-1", "option fetch_max_wait_ms='-1': expected an integer >= 0"),
    ("session_timeout_ms=0", "option session_timeout_ms='0': expected an integer >= 1"),
    ("replication_factor=0", "replication_factor='0': expected -1 \\(broker default\\)"),
    ("create_topics=maybe", "option create_topics='maybe': expected true or false"),
    ("auto_offset_reset=middle", "auto_offset_reset='middle': expected one of latest, earliest"),
    ("security_protocol=tls", "security_protocol='TLS': expected one of PLAINTEXT, SSL, "),
    ("sasl_mechanism=md5", "sasl_mechanism='MD5': expected one of PLAIN, SCRAM-SHA-256"),
    ("grup_id=x&bogus=1", "unknown option\\(s\\) \\['bogus', 'grup_id'\\]; known: api_version"),
])
def test_option_errors_name_the_option_the_value_and_what_is_expected(query, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_url(f"kafka://h?{query}")


def test_blank_optional_options_mean_unset():
    ep = parse_url("kafka://h?group_id=&session_timeout_ms=&api_version=&ssl_cafile=")
    assert (ep.group_id, ep.session_timeout_ms, ep.api_version, ep.ssl_cafile) == (None,) * 4
    assert parse_url("kafka://h?security_protocol=ssl&create_topics=0").security_protocol == "SSL"
