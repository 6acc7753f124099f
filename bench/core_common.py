"""Shared by the core benchmarks: scratch stores, bulk loading, percentiles."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from partition_notify.store import Store, TableInfo  # noqa: E402
from partition_notify.store.schema import SetDoneRow  # noqa: E402
from sqlalchemy import create_engine, insert, text  # noqa: E402

from partition_notify.contract import SetDoneMessage, to_envelope  # noqa: E402

PG_ADMIN_URL = os.environ.get(
    "PN_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
BACKENDS = ("sqlite", "postgresql")


def backends(choice: str) -> list[str]:
    return list(BACKENDS) if choice == "both" else [choice]


@contextlib.contextmanager
def scratch_store_url(backend: str, admin_url: str = PG_ADMIN_URL) -> Iterator[str]:
    """A fresh empty database for one run, removed afterwards."""
    if backend == "sqlite":
        tmp = tempfile.mkdtemp(prefix="pn-bench-")
        try:
            yield f"sqlite:///{tmp}/store.db"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT",
                          connect_args={"connect_timeout": 5})
    name = f"pn_bench_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def body_factory(info: TableInfo) -> Callable[[dict[str, str], int, float, float], str]:
    """Real set-done bodies (decodable), made from one encoded message as a template."""
    proto = SetDoneMessage.model_validate({
        "server": "bench", "db": info.db, "table": info.name, "timestamp": 0,
        "messageId": uuid.uuid4().hex, "eventId": 1, "topic": info.topic, "topicSeq": 1,
        "partitionSpec": {"ds": "x"}, "partitionSpecString": "ds=x", "expiresAt": 0,
    })
    template = json.loads(to_envelope(proto).body)

    def make(values: dict[str, str], event_id: int, published: float, expires: float) -> str:
        template.update({
            "partitionSpec": values, "partitionSpecString": plain_canonical(values),
            "eventId": event_id, "topicSeq": event_id, "messageId": f"{event_id:032x}",
            "timestamp": int(published), "timestampMs": int(published * 1000),
            "expiresAt": int(expires),
        })
        return json.dumps(template, separators=(",", ":"))

    return make


def plain_canonical(values: dict[str, str]) -> str:
    """spec.canonical for values known to need no escaping, keys already sorted (fast)."""
    return "/".join(f"{k}={v}" for k, v in values.items())


COLUMNS = ("table_id", "spec", "event_id", "body", "published_at", "expires_at")


def bulk_load_set_done(store: Store, rows: Iterable[tuple[Any, ...]], *,
                       batch: int = 20_000, progress: str = "") -> int:
    """Insert (table_id, spec, event_id, body, published_at, expires_at) tuples fast.

    PostgreSQL: COPY through the SQLAlchemy connection's psycopg cursor;
    SQLite: executemany of an SQLAlchemy insert, one transaction per batch.
    """
    n = 0
    started = time.perf_counter()

    def report() -> None:
        if progress:
            rate = n / max(time.perf_counter() - started, 1e-9)
            print(f"  {progress}: {n:,} rows loaded ({rate:,.0f}/s)", flush=True)

    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= batch:
            _load_chunk(store, chunk)
            n += len(chunk)
            chunk = []
            if n % (batch * 10) == 0:
                report()
    if chunk:
        _load_chunk(store, chunk)
        n += len(chunk)
    report()
    return n


def _load_chunk(store: Store, chunk: list[tuple[Any, ...]]) -> None:
    if store.dialect == "postgresql":
        with store.engine.begin() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            with raw.cursor() as cur, cur.copy(
                    f"COPY pn_set_done ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                for row in chunk:
                    copy.write_row(row)
        return
    with store.engine.begin() as conn:
        conn.execute(insert(SetDoneRow), [dict(zip(COLUMNS, r, strict=True)) for r in chunk])


def analyze(store: Store, table: str = "pn_set_done") -> None:
    """Fresh planner statistics, as autovacuum / a periodic ANALYZE would leave them
    (PostgreSQL: of ``table``, one of ours; SQLite: of every table)."""
    if store.dialect == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"VACUUM ANALYZE {table}"))
    else:
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE"))


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def summary_ms(samples_s: list[float]) -> str:
    ms = [x * 1000 for x in samples_s]
    return (f"n={len(ms):,} p50={pct(ms, 50):.3f} ms  p90={pct(ms, 90):.3f} ms  "
            f"p99={pct(ms, 99):.3f} ms  max={max(ms):.3f} ms  mean={statistics.fmean(ms):.3f} ms")


def machine_note() -> str:
    load = os.getloadavg()
    return (f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f}/{load[1]:.1f}/"
            f"{load[2]:.1f} (1/5/15 min) — other work on the machine inflates tail latencies")
