"""``serve`` purges discarded Airflow push dead letters past their retention."""

from __future__ import annotations

from pathlib import Path

from partition_notify.store.push_letters import (
    DISCARDED_RETENTION_SECONDS,
    PushLetterRow,
    PushLetters,
)
from sqlalchemy import update

from partition_notify.app import build_app
from partition_notify.serve.jobs import JOBS
from partition_notify.serve.service import Service

SINK = "airflow-push:http://airflow:8080"


def test_the_purge_job_deletes_only_letters_discarded_past_retention(tmp_path: Path) -> None:
    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        letters = PushLetters(app.store)
        for event_id in (1, 2, 3):
            letters.record(SINK, event_id, "sales.orders", "HTTP 404: asset gone")
        letters.discard([1, 2])
        old = app.store.clock() - DISCARDED_RETENTION_SECONDS - 1
        with app.store.engine.begin() as conn:  # discarded 30 days and a second ago
            conn.execute(update(PushLetterRow).where(PushLetterRow.event_id == 1)
                         .values(discarded_at=old))
        (job,) = [j for j in JOBS if j.id == "airflow-push-letters-purge"]
        built = job.build(Service(app).runtime)
        assert built is not None  # on without PN_AIRFLOW_URL: letters outlive the sink
        run, seconds = built
        assert seconds == app.settings.purge_interval_seconds
        run()
        assert [(d.event_id, d.discarded) for d in letters.find()] == [(2, True), (3, False)]
