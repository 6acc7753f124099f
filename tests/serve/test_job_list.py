"""``serve`` and ``serve --once`` run the one job list (partition_notify/serve/jobs.py)."""

from __future__ import annotations

from pathlib import Path

from partition_notify.app import build_app
from partition_notify.serve.jobs import JOBS, Job, Runtime
from partition_notify.serve.service import Service


def test_the_list_has_every_job_of_serve() -> None:
    assert [j.id for j in JOBS] == [
        "health", "spark-commits", "iceberg-follow", "delta-follow", "relay", "purge",
        "housekeeping", "spool-sweep", "dataset-expiry", "rules", "deadlines", "airflow-push",
        "airflow-push-letters-purge"]


def test_once_and_scheduled_run_the_same_jobs(tmp_path: Path) -> None:
    ran: list[str] = []

    def recorder(name: str) -> Job:
        def build(rt: Runtime) -> tuple[object, float]:
            assert rt.app.store is not None
            return (lambda: ran.append(name)), 3600.0
        return Job(name, build)  # type: ignore[arg-type]

    off = Job("off", lambda rt: None)
    with build_app(store_url=f"sqlite:///{tmp_path}/s.db", transport_url="embedded://") as app:
        once = Service(app, jobs=[*JOBS[:1], recorder("a"), off, recorder("b")])
        once.run_once()
        assert ran == ["a", "b"] and once.healthy.is_set()
        scheduled = Service(app, jobs=[recorder("a"), off, recorder("b")])
        scheduled.start()
        try:
            assert sorted(j.id for j in scheduled.scheduler.get_jobs()) == ["a", "b"]
        finally:
            scheduled.stop()
