"""The writer side of the end-to-end benches: ``serve`` with HTTP and one Spark driver.

Shared by bench/e2e_airflow.py and bench/e2e_dagster.py: a temporary SQLite
store (embedded transport) with the bench table registered, ``partition-notify
serve`` with the HTTP API on it, and ``bench/e2e_spark_child.py`` (core venv)
writing with the commit protocol on; both started under :class:`e2e_procs.Procs`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_procs import LineReader, Procs, http_ok, wait_for
from timing_relay import TimingRelay

ROOT = Path(__file__).resolve().parents[1]
TABLE = "bench.orders"
SPARK_START_TIMEOUT = 300.0
SERVE_START_TIMEOUT = 60.0


@dataclass
class Writer:
    app: Any
    store_url: str
    serve_url: str
    table_path: str
    spark_in: Any
    spark_out: LineReader
    #: Between the Spark driver and serve when asked for (``start_writer(timed=True)``).
    relay: TimingRelay | None = None

    def write(self, day: str, timeout: float) -> dict[str, Any]:
        """Append to partition ``datestamp=<day>`` and mark it done; the child's JSON answer."""
        self.spark_in.write(f"write {day}\n".encode())
        self.spark_in.flush()
        answer: dict[str, Any] = json.loads(self.spark_out.read(timeout))
        return answer

    def set_done_of(self, day: str) -> dict[str, Any]:
        """The logged set-done of ``datestamp=<day>``: event id, revision (= commit ms), log ms."""
        found = self.find_set_done(day)
        if found is None:
            raise RuntimeError(f"no set-done of datestamp={day} in the store")
        return found

    def find_set_done(self, day: str) -> dict[str, Any] | None:
        from partition_notify.contract import SetDoneMessage, decode

        for ev in reversed(self.app.store.log.events_after(0, limit=100_000)):
            msg = decode(ev.body)
            if isinstance(msg, SetDoneMessage) and msg.spec == f"datestamp={day}":
                return {"eventId": ev.event_id, "revision": msg.revision,
                        "timestampMs": json.loads(ev.body)["timestampMs"]}
        return None

    def wait_set_done(self, day: str, timeout: float, alive: Any) -> dict[str, Any]:
        """The set-done, once logged: ``df.write`` can return before the driver's POST lands."""
        found: list[dict[str, Any]] = []

        def logged() -> bool:
            hit = self.find_set_done(day)
            if hit is not None:
                found.append(hit)
            return hit is not None

        wait_for(logged, timeout, f"the set-done of datestamp={day} in the store", alive)
        return found[0]


def start_writer(procs: Procs, tmp: Path, store_url: str | None = None,
                 timed: bool = False) -> Writer:
    """Register the table, start ``serve`` and the Spark child; return once both are ready.
    The store: ``store_url`` (an empty one), else a new SQLite file in ``tmp``. ``timed``:
    the driver talks to serve through a :class:`TimingRelay` (when each request's first
    byte came), closed by the caller."""
    from partition_notify.app import build_app
    from partition_notify.http.store import HttpStore
    from tests.support.net import free_port

    table_path = str(tmp / "warehouse" / "orders")
    store_url = store_url or f"sqlite:///{tmp}/pn-store.db"
    app = build_app(store_url=store_url, transport_url="embedded://")
    db, name = TABLE.split(".")
    app.publisher.register_table(db, name, ["datestamp"], location=f"file:{table_path}")
    token = HttpStore(app.store).create_token("bench-e2e", "write")[1]
    core_py = ROOT / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    port = free_port()
    serve_url = f"http://127.0.0.1:{port}"
    procs.start("serve", [str(core_py), "-m", "partition_notify.cli", "serve"], {
        **env, "PN_STORE_URL": store_url, "PN_TRANSPORT_URL": "embedded://",
        "PN_HTTP_BIND": f"127.0.0.1:{port}"}, cwd=str(ROOT))
    wait_for(lambda: http_ok(f"{serve_url}/readyz"), SERVE_START_TIMEOUT, "serve",
             procs.check_alive)
    relay = TimingRelay(port) if timed else None
    spark = procs.start(
        "spark", [str(core_py), str(ROOT / "bench" / "e2e_spark_child.py"),
                  "--table-path", table_path, "--serve-url", relay.url if relay else serve_url],
        {**env, "PN_WRITER_TOKEN": token}, cwd=str(ROOT), stdin=-1, stdout_pipe=True)
    out = LineReader(spark)
    if out.read(SPARK_START_TIMEOUT) != "ready":
        raise RuntimeError("the Spark child did not say ready")
    return Writer(app, store_url, serve_url, table_path, spark.stdin, out, relay)
