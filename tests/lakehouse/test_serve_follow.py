"""``serve --once`` runs the delta-follow job (and iceberg-follow) with the rest of JOBS,
through the CLI's own registration."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake

from partition_notify.app import build_app
from partition_notify.cli import main
from partition_notify.serve.service import Service
from tests.lakehouse.helpers import delta_rows, logged


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/store.db"


def test_serve_once_announces_a_delta_commit_and_counts_it(tmp_path: Path, store: str) -> None:
    location = str(tmp_path / "orders")
    assert main(["--store-url", store, "register", "sales.orders", "--keys",
                 "datestamp,region", "--format", "delta", "--location", location]) == 0
    write_deltalake(location, delta_rows(("20260101", "us", 1)), partition_by=["datestamp",
                                                                               "region"])
    with build_app(store_url=store, transport_url="embedded://") as app:
        service = Service(app)
        service.run_once()
        assert [m.spec for m in logged(app, "sales.orders")] == ["datestamp=20260101/region=us"]
        assert service.metrics.lakehouse_commits.labels("delta")._value.get() == 1
        assert DeltaTable(location).version() == 0


@pytest.mark.parametrize(("argv", "says"), [
    (["--format", "iceberg"], "needs --catalog NAME"),
    (["--format", "delta"], "needs --location PATH"),
    (["--catalog", "lake"], "need --format iceberg"),
    (["--format", "delta", "--location", "/x", "--catalog", "c"], "not --catalog"),
])
def test_register_refuses_an_incomplete_format_in_one_line(
        store: str, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--store-url", store, "register", "sales.orders", "--keys", "ds", *argv])
    err = capsys.readouterr().err
    assert code == 1 and says in err and err.count("\n") == 1
    with build_app(store_url=store, transport_url="embedded://") as app:
        assert app.store.catalog.tables() == []  # refused before anything was stored


def test_register_iceberg_follows_from_the_current_snapshot(
        tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from partition_notify.writers.lakehouse.iceberg import catalog_properties
    from pyiceberg.catalog import load_catalog

    from tests.lakehouse.helpers import catalog_env, iceberg_table, rows

    (tmp_path / "wh").mkdir()
    env = catalog_env("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    table = iceberg_table(load_catalog("lake", **catalog_properties("lake", env)))
    table.append(rows(table, ("2026-01-01", "us", 1)))
    current = table.current_snapshot().snapshot_id

    assert main(["--store-url", store, "register", "sales.orders", "--keys",
                 "datestamp_day,region", "--format", "iceberg", "--catalog", "lake"]) == 0
    assert f"after_commit={current}" in capsys.readouterr().out
    table.append(rows(table, ("2026-01-01", "us", 2), ("2026-01-02", "us", 3)))
    with build_app(store_url=store, transport_url="embedded://") as app:
        Service(app).run_once()
        assert [m.spec for m in logged(app, "sales.orders")] == [
            "datestamp_day=2026-01-02/region=us"]
