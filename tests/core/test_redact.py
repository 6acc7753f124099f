"""``redact_url`` never prints any part of a password, even an unencoded one that
URL parsers cut at ``?``, ``#``, ``/`` or ``@`` (SQLAlchemy's store URL parser takes
everything up to the ``@`` as the password, so such URLs do connect)."""

from __future__ import annotations

import pytest

from partition_notify.core.redact import redact_url

SECRET_PARTS = ("pa", "ss", "wo", "rd")


@pytest.mark.parametrize(
    "password",
    [
        "pa?ss",
        "pa#ss",
        "pa/ss",
        "pa@ss",
        "pa?ss#wo/rd@x",
        "pa/ss?wo#rd",
        "pa:ss",
    ],
)
@pytest.mark.parametrize(
    "template",
    [
        "postgresql+psycopg://pn:{pw}@db.example:5432/pn",
        "postgresql://pn:{pw}@db.example/pn?application_name=pn",
        "stomp://pn:{pw}@broker.example:61613",
        "kafka://pn:{pw}@[::1]:9092",
        "amqp://:{pw}@broker.example",
    ],
)
def test_no_part_of_an_unencoded_password_is_printed(template: str, password: str) -> None:
    shown = redact_url(template.format(pw=password))
    assert ":***@" in shown, shown
    leaked = [p for p in SECRET_PARTS if p in password and p in shown]
    assert not leaked, (shown, leaked)
    assert shown.split("@")[-1] == template.split("@")[-1], shown  # the host stays


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://pn:secret@db.example:5432/pn",
            "postgresql+psycopg://pn:***@db.example:5432/pn",
        ),
        ("stomp://admin:p%40ss@[::1]:61613", "stomp://admin:***@[::1]:61613"),
        ("postgresql://pn@db.example/pn", "postgresql://pn@db.example/pn"),
        (
            "postgresql://db.example/pn?password=secret&sslmode=require",
            "postgresql://db.example/pn?password=***&sslmode=require",
        ),
        ("sqlite:////var/lib/pn/store.db", "sqlite:////var/lib/pn/store.db"),
        ("embedded://", "embedded://"),
        ("kafka://broker.example:9092", "kafka://broker.example:9092"),
    ],
)
def test_valid_urls_are_redacted_as_before(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_an_at_sign_in_a_query_hides_more_rather_than_risk_a_password() -> None:
    # Ambiguous: SQLAlchemy reads user "pn", password "5432/pn?email=ops" at host
    # example.org, so that part is hidden (more than a password, never less).
    assert (
        redact_url("postgresql://pn:5432/pn?email=ops@example.org")
        == "postgresql://pn:***@example.org"
    )
