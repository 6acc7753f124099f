"""The connect deadline's default is one constant, core.limits.CONNECT_TIMEOUT_SECONDS:
the setting, the store's and the transports' own defaults and the docs' numbers.

Before: ``10.0`` was written out in the settings, Store.open, make_engine,
store/pg_deadlines.py and five transport signatures, and the docs' "(10 s)" and
"(30 s)" followed none of them.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from partition_notify.store import Store, make_engine
from partition_notify.store.engine import sqlite_lock_seconds
from partition_notify.transports.kafka.config import KafkaEndpoint
from partition_notify.transports.kafka.config import parse_url as kafka_url
from partition_notify.transports.kafka.transport import KafkaTransport
from partition_notify.transports.stomp._wire import Endpoint
from partition_notify.transports.stomp.transport import StompTransport
from partition_notify.transports.stomp.transport import parse_url as stomp_url
from sqlalchemy import create_engine

from partition_notify.core.limits import CONNECT_TIMEOUT_SECONDS
from partition_notify.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
#: A connect timeout's default written as a number instead of the constant.
LITERAL = re.compile(r"connect_timeout\w*: float = (?:Field\(\s*)?[0-9][0-9.]*|"
                     r"tcp_args\([^)]*[0-9]+\.[0-9]+\)")


def test_every_default_is_the_constant() -> None:
    defaults = {
        "Settings": Settings.model_fields["connect_timeout_seconds"].default,
        "Store.open": inspect.signature(Store.open).parameters["connect_timeout_seconds"].default,
        "make_engine": inspect.signature(make_engine).parameters[
            "connect_timeout_seconds"].default,
        "stomp parse_url": inspect.signature(stomp_url).parameters["connect_timeout"].default,
        "StompTransport.from_url": inspect.signature(StompTransport.from_url).parameters[
            "connect_timeout"].default,
        "stomp Endpoint": {f.name: f.default for f in dataclasses.fields(Endpoint)}[
            "connect_timeout"],
        "kafka parse_url": inspect.signature(kafka_url).parameters["connect_timeout"].default,
        "KafkaTransport.from_url": inspect.signature(KafkaTransport.from_url).parameters[
            "connect_timeout"].default,
        "KafkaEndpoint": {f.name: f.default for f in dataclasses.fields(KafkaEndpoint)}[
            "connect_timeout"],
    }
    assert defaults == dict.fromkeys(defaults, CONNECT_TIMEOUT_SECONDS)
    engine = create_engine("sqlite://")  # not make_engine's: the default lock deadline
    assert sqlite_lock_seconds(engine) == 3 * CONNECT_TIMEOUT_SECONDS
    engine.dispose()


def test_no_connect_timeout_default_is_written_as_a_number() -> None:
    found = [f"{path.relative_to(ROOT)}: {match.group()}"
             for folder in ("store", "transports", "partition_notify")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for match in LITERAL.finditer(path.read_text())]
    assert found == []


def test_the_docs_numbers_are_the_constants() -> None:
    text = (ROOT / "docs" / "reliability.md").read_text()
    times = "3 \N{MULTIPLICATION SIGN} "
    setting = r"`PN_CONNECT_TIMEOUT_SECONDS` \(([0-9.]+) s\)"
    once = re.findall(f"(?<!{times}){setting}", text)
    thrice = re.findall(times + setting, text)
    assert once and thrice, "docs/reliability.md no longer states the connect deadline"
    assert {float(n) for n in once} == {CONNECT_TIMEOUT_SECONDS}
    assert {float(n) for n in thrice} == {3 * CONNECT_TIMEOUT_SECONDS}
