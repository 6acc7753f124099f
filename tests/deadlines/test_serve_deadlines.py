"""Two real ``serve`` processes check one expectation: one late message per instance.

Every-minute schedule with a zero offset, so instances fall due while the
test runs; both processes check every half second. One covering set-done
then brings exactly one recovery.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from partition_notify.app import App, build_app
from partition_notify.http.store import HttpStore
from tests.http.support import HttpServe
from tests.support.ci import require
from tests.support.net import wait_until
from tests.support.postgres import PG_ADMIN_URL, PostgresDatabases


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, postgres: PostgresDatabases | None) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tempfile.mkdtemp(prefix='pn-dl-')}/store.db"
        return
    require(postgres is not None, f"PostgreSQL at {PG_ADMIN_URL} is not reachable")
    assert postgres is not None
    u = postgres.new()
    yield u
    postgres.drop(u)


def bodies(app: App, event_type: str) -> list[dict[str, object]]:
    with app.store.engine.connect() as conn:
        rows = conn.execute(text("SELECT body FROM pn_events WHERE event_type = :t"),
                            {"t": event_type})
        return [json.loads(r[0]) for r in rows]


def checks(serve: HttpServe) -> float:
    m = re.search(r"^pn_deadline_checks_total (\S+)$",
                  httpx.get(serve.base + "/metrics", timeout=10).text, re.M)
    return float(m.group(1)) if m else 0.0


def test_two_serve_processes_publish_one_late_and_one_recovery(url: str) -> None:
    app = build_app(store_url=url, transport_url="embedded://")
    tmp = Path(tempfile.mkdtemp(prefix="pn-dl-"))
    procs: list[HttpServe] = []
    try:
        app.publisher.register_table("ops", "ticks", ["ts"])
        app.deadlines.add("ops", "ticks", name="minutely", spec_template="ts={{ ts_nodash }}",
                          cron="* * * * *", deadline="+1s")
        # A new expectation judges only deadlines after its creation; created "long ago",
        # the lookback's two past minutes are due at once (not in 60 to 120 s).
        with app.store.engine.begin() as conn:
            conn.execute(text("UPDATE pn_expectations SET created_at = 0"))
        token = HttpStore(app.store).create_token("w", "write")[1]
        env = {"PN_DEADLINE_CHECK_INTERVAL_SECONDS": "0.5",
               "PN_DEADLINE_LOOKBACK_SECONDS": "150"}
        procs = [HttpServe(url, tmp / f"serve{i}.log", env_extra=env).start() for i in range(2)]
        wait_until(lambda: len(bodies(app, "PARTITION_LATE")) >= 2, 90, "two late instances")
        # Both processes go on checking: still one message per instance.
        marks = [checks(p) for p in procs]
        wait_until(lambda: all(checks(p) >= m + 4 for p, m in zip(procs, marks, strict=True)),
                   60, "four more checks by each process")
        late = bodies(app, "PARTITION_LATE")
        per_instance = Counter(str(b["logicalDate"]) for b in late)
        assert per_instance and max(per_instance.values()) == 1, per_instance
        # Late, then done: one recovery.
        target = str(late[0]["partitionSpecString"])
        r = httpx.post(procs[1].base + "/v1/tables/ops.ticks/set-done", json={"spec": target},
                       headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 201, r.text
        wait_until(lambda: any(b["partitionSpecString"] == target
                               for b in bodies(app, "PARTITION_LATE_RECOVERED")),
                   60, "the recovery")
        marks = [checks(p) for p in procs]
        wait_until(lambda: all(checks(p) >= m + 4 for p, m in zip(procs, marks, strict=True)),
                   60, "four more checks by each process")
        rec = [b for b in bodies(app, "PARTITION_LATE_RECOVERED")
               if b["partitionSpecString"] == target]
        assert len(rec) == 1 and rec[0]["setDoneEventId"] == r.json()["setDone"]["eventId"]
        assert Counter(str(b["logicalDate"]) for b in bodies(app, "PARTITION_LATE")).most_common(
            1)[0][1] == 1
        late_api = httpx.get(procs[0].base + "/v1/tables/ops.ticks/late",
                             headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
        assert target not in [x["spec"] for x in late_api["late"]]
    finally:
        codes = [p.stop() for p in procs]
        app.close()
    assert codes == [0] * len(procs), [p.text()[-2000:] for p in procs]
