"""Text settings refuse what would corrupt a topic, a log line, a header or a message.

Before: ``PN_TOPIC_PREFIX=`` was accepted and every per-table topic became
``.db.table`` (the README: the prefix is "the first part of every topic name");
``PN_SERVER_NAME`` (and every other text setting) took a newline, a carriage
return, a NUL or an escape character, which then went into messages' ``server``
field, STOMP headers (a newline there starts a header of the value's choosing)
and log lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from partition_notify import build_app
from partition_notify.contract.topics import topic_for
from partition_notify.core.errors import ConfigurationError, InvalidNameError
from partition_notify.settings import Settings, load_settings
from tests.support.cli import clean_cli

#: Every text setting (str or secret) and a good value for it.
TEXT = {"store_url": "sqlite:///s.db", "transport_url": "embedded://",
        "broker_username": "pn", "broker_password": "pw", "server_name": "pn-prod",
        "service_principal": "pn/host@REALM", "topic_prefix": "hcat",
        "default_fs": "hdfs://nn:8020", "spark_spool_dirs": "/a,/b",
        "metrics_bind": "127.0.0.1", "http_bind": "127.0.0.1:8080"}


def test_every_text_setting_is_listed() -> None:
    texts = {name for name, info in Settings.model_fields.items()
             if "str" in str(info.annotation) or "Secret" in str(info.annotation)}
    assert texts == set(TEXT)  # a new one gets a case here


@pytest.mark.parametrize("value", ["", ".", "..", ".hcat", "hcat.", "a..b", "hc at", "hcat/x"])
def test_a_topic_prefix_that_is_no_name_part_is_refused(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"topic_prefix=.*expected"):
        load_settings(topic_prefix=value)
    with pytest.raises(InvalidNameError):
        topic_for("db", "t", prefix=value)


@pytest.mark.parametrize("value", ["hcat", "a.b", "Team_1-x", "pnbench0a1b2c3d"])
def test_topic_prefixes_that_name_a_part_are_kept(value: str) -> None:
    assert load_settings(topic_prefix=value).topic_prefix == value
    assert topic_for("db", "t", prefix=value) == f"{value}.db.t".lower()


def test_an_empty_prefix_is_one_line_naming_the_variable(sqlite_url: str,
                                                          tmp_path: Path) -> None:
    build_app(store_url=sqlite_url).close()
    done = clean_cli(["--store-url", sqlite_url, "register", "db.t", "--keys", "a"], tmp_path,
                PN_TOPIC_PREFIX="")
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "PN_TOPIC_PREFIX=''" in lines[0], done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("char", ["\n", "\r", "\x00", "\x1b", "\x7f", "\x85", "\t"])
@pytest.mark.parametrize("name", sorted(TEXT))
def test_a_control_character_is_refused_naming_the_setting(name: str, char: str) -> None:
    value = TEXT[name][:2] + char + TEXT[name][2:]
    with pytest.raises(ConfigurationError) as caught:
        load_settings(**{name: value})
    message = str(caught.value)
    assert f"{name}" in message and "control character" in message, message
    assert "expected printable text" in message, message
    if name == "broker_password":  # a secret's value is never echoed
        assert "pw" not in message.replace("password", ""), message
    else:
        assert repr(value)[:20] in message, message


def test_a_newline_in_the_server_name_is_one_line_naming_the_variable(
        sqlite_url: str, tmp_path: Path) -> None:
    build_app(store_url=sqlite_url).close()
    done = clean_cli(["--store-url", sqlite_url, "tables"], tmp_path,
                PN_SERVER_NAME="pn\nX-Injected: 1" + "y" * 200)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].count("y") < 100, lines[0]  # the value's repr is truncated
    assert "PN_SERVER_NAME='pn\\nX-Injected: 1" in lines[0], lines[0]
    assert "'\\n' at position 2" in lines[0], lines[0]


def test_good_text_settings_are_kept() -> None:
    settings = load_settings(**TEXT)
    assert settings.server_name == "pn-prod" and settings.service_principal == "pn/host@REALM"
    assert settings.broker_password is not None
    assert settings.broker_password.get_secret_value() == "pw"
    assert load_settings(server_name="café ünïcode").server_name == "café ünïcode"
