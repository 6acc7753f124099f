"""A malformed ``PN_AIRFLOW_*`` setting of serve's Airflow push sink (docs/schedulers.md,
README "Partition push") is one stderr line naming the variable, its value and what was
expected, exit 1, as for every ``PN_*`` setting. Before: a 40-line pydantic traceback
(``SettingsError: error parsing value for field "assets"``). Real ``serve --once``; the
sink is refused before it would call Airflow, so no Airflow is needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.helpers import ROOT


def _serve_once(store_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "serve", "--once"], cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
             "PYTHONPATH": str(ROOT), "PN_STORE_URL": store_url,
             "PN_TRANSPORT_URL": "embedded://", "PN_AIRFLOW_URL": "http://127.0.0.1:1",
             "PN_AIRFLOW_USERNAME": "pn", "PN_AIRFLOW_PASSWORD": "s3cret-pw", **env},
        text=True, capture_output=True, timeout=120)


@pytest.mark.parametrize(("env", "named"), [
    ({"PN_AIRFLOW_ASSETS": "{bad"}, "PN_AIRFLOW_ASSETS='{bad'"),
    ({"PN_AIRFLOW_ASSETS": '["sales_orders"]'}, "PN_AIRFLOW_ASSETS='[\"sales_orders\"]'"),
    ({"PN_AIRFLOW_ASSETS": '{"sales.orders": "a"}', "PN_AIRFLOW_TIMEOUT_SECONDS": "abc"},
     "PN_AIRFLOW_TIMEOUT_SECONDS='abc'"),
    # Before session 28: inf was a traceback (OverflowError from the socket's timeout),
    # 1e300 an interval that never came, a URL without scheme or host a failed push at
    # every run ("unknown url type"), an empty asset name a request Airflow refuses.
    ({"PN_AIRFLOW_ASSETS": '{"sales.orders": "a"}', "PN_AIRFLOW_TIMEOUT_SECONDS": "inf"},
     "PN_AIRFLOW_TIMEOUT_SECONDS='inf'"),
    ({"PN_AIRFLOW_ASSETS": '{"sales.orders": "a"}', "PN_AIRFLOW_INTERVAL_SECONDS": "1e300"},
     "PN_AIRFLOW_INTERVAL_SECONDS='1e300': Value error, must be at most 315360000 seconds"),
    ({"PN_AIRFLOW_ASSETS": '{"sales.orders": "a"}', "PN_AIRFLOW_URL": "airflow:8080"},
     "PN_AIRFLOW_URL='airflow:8080': Value error, expected http(s)://host[:port]"),
    ({"PN_AIRFLOW_ASSETS": '{"sales.orders": "a"}', "PN_AIRFLOW_URL": "http://air flow"},
     "PN_AIRFLOW_URL='http://air flow': Value error, expected http(s)://host[:port]"),
    ({"PN_AIRFLOW_ASSETS": '{"sales.orders": ""}'},
     "PN_AIRFLOW_ASSETS='{\"sales.orders\": \"\"}': Value error, sales.orders: expected"),
])
def test_a_bad_push_setting_is_one_line(sqlite_url: str, env: dict[str, str],
                                        named: str) -> None:
    done = _serve_once(sqlite_url, **env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert named in lines[0], lines
    assert "s3cret-pw" not in done.stderr


def test_bad_json_says_what_is_expected(sqlite_url: str) -> None:
    done = _serve_once(sqlite_url, PN_AIRFLOW_ASSETS="{bad")
    assert 'expected JSON like {"sales.orders": "sales_orders"}' in done.stderr, done.stderr


def test_bad_json_in_the_env_file_is_named_there(sqlite_url: str, tmp_path: Path) -> None:
    # The value is not in the environment: the line must not claim it is '' there.
    (tmp_path / ".env").write_text("PN_AIRFLOW_ASSETS={bad\n")
    done = subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", "serve", "--once"], cwd=tmp_path,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PN_")},
             "PYTHONPATH": str(ROOT), "PN_STORE_URL": sqlite_url,
             "PN_TRANSPORT_URL": "embedded://", "PN_AIRFLOW_URL": "http://127.0.0.1:1"},
        text=True, capture_output=True, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "PN_AIRFLOW_ASSETS (in .env)" in lines[0] and "expected JSON" in lines[0], lines


def test_an_unregistered_mapped_table_is_a_startup_warning(sqlite_url: str) -> None:
    # Session 24: it passed silently (the failing token call hid it). Not refused: a
    # producer's first run may register it after serve started; pushed from then on.
    from partition_notify.app import build_app

    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        app.publisher.register_table("sales", "orders", ["ds"])
    done = _serve_once(sqlite_url, PN_AIRFLOW_ASSETS=json.dumps(
        {"sales.orders": "orders", "sales.returns": "returns", "sales.refunds": 7}))
    warned = [line for line in done.stderr.splitlines() if "not registered" in line]
    assert len(warned) == 1, done.stderr
    assert "WARNING" in warned[0], warned
    assert "PN_AIRFLOW_ASSETS maps sales.refunds, sales.returns, not registered" in warned[0]
    assert "partition-notify register sales.refunds --keys" in warned[0], warned
    assert "sales.orders" not in warned[0], warned


def test_a_mapped_name_that_is_not_db_table_is_refused(sqlite_url: str) -> None:
    done = _serve_once(sqlite_url, PN_AIRFLOW_ASSETS='{"orders": "orders"}')
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "PN_AIRFLOW_ASSETS: 'orders' is not a table name: expected db.table" in lines[0], lines


def test_the_unregistered_count_follows_registration(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The metric pn_airflow_push_unregistered_tables: set each run, 0 once registered.
    from partition_notify.integrations.airflow.push import push_job

    from partition_notify.app import build_app

    monkeypatch.setenv("PN_AIRFLOW_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("PN_AIRFLOW_ASSETS", '{"sales.orders": "o", "sales.returns": "r"}')
    counts: list[int] = []
    with build_app(store_url=sqlite_url, transport_url="embedded://") as app:
        made = push_job(app.store, lambda n: None, failed=lambda *a: None,
                        count_unregistered=counts.append)
        assert made is not None
        job, _ = made
        job()
        app.publisher.register_table("sales", "orders", ["ds"])
        job()
        app.publisher.register_table("sales", "returns", ["ds"])
        job()
        job()
    assert counts == [2, 1, 0, 0]
