"""``serve`` runs SNAPSHOT-dataset retention as one of its jobs."""

from __future__ import annotations

from pathlib import Path

from partition_notify.app import App, build_app
from partition_notify.serve.service import Service
from tests.support.net import wait_until


def _committed_version(app: App, name: str, location: str) -> str:
    """One run that wrote a file and committed; returns its directory."""
    tx, path = app.datasets.start(name, location, None)
    Path(path).mkdir(parents=True)
    (Path(path) / "part-00000.parquet").write_bytes(b"PAR1")
    _, refusal = app.datasets.commit(name, tx)
    assert refusal is None
    return path


def test_a_running_serve_expires_what_retention_lets_go(tmp_path: Path) -> None:
    app = build_app(store_url=f"sqlite:///{tmp_path}/store.db", transport_url="embedded://",
                    dataset_expiry_interval_seconds=0.05)
    service = Service(app)
    try:
        name, location = app.datasets.define("w.customers", str(tmp_path / "customers"))
        first = _committed_version(app, name, location)
        tx, failed = app.datasets.start(name, location, None)
        Path(failed).mkdir(parents=True)
        app.datasets.abort(name, tx, "source unavailable")
        service.start()
        wait_until(lambda: not Path(failed).exists(), 30, "serve to expire the failed run")
        assert Path(first).exists(), "the current version is kept"
        # A second version supersedes it; without a TTL only min_versions=1 stays,
        # so a later run of the job (not the one at start) must remove the first.
        second = _committed_version(app, name, location)
        # Files go before rows (a crash in between is finished by the next run):
        # the job is done when the row is gone too.
        wait_until(lambda: not Path(first).exists()
                   and [v.path for v in app.datasets.versions(name)] == [second], 30,
                   "serve to expire the superseded version (files and row)")
        assert Path(second).exists()
    finally:
        service.stop()
        app.close()
