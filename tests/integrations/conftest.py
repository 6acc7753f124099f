"""Real Airflow and Dagster: a temporary AIRFLOW_HOME migrated once per session.

These tests run in the schedulers' own venv (scripts/bootstrap.sh makes it;
Airflow pins packages the core venv has moved past). In CI a missing Airflow
or Dagster fails, on a laptop it skips (``tests.conftest.require``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ci import require

#: `airflow db migrate` on SQLite took ~9 s here; generous for a loaded CI box.
MIGRATE_TIMEOUT_SECONDS = 240
#: The DAG files dag.test() parses (it runs DAGs from their bundle, not from memory).
DAGS = Path(__file__).with_name("dags")


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """AIRFLOW_HOME with a migrated SQLite metadata DB; set before Airflow is imported.

    (Even ``find_spec("airflow.sdk")`` imports ``airflow``, which fixes its home.)
    """
    home = tmp_path_factory.mktemp("airflow_home")
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    require(_has("airflow.sdk"), f"apache-airflow is not installed in {sys.executable}")
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True, capture_output=True, timeout=MIGRATE_TIMEOUT_SECONDS,
    )
    yield home
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def pn_connection(monkeypatch: pytest.MonkeyPatch) -> object:
    """Define an Airflow connection as an AIRFLOW_CONN_* variable (the env backend)."""

    def define(conn_id: str, *, extra: dict[str, object], login: str | None = None,
               password: str | None = None) -> str:
        conn = {"conn_type": "partition_notify", "extra": extra}
        if login:
            conn["login"] = login
        if password:
            conn["password"] = password
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
        return conn_id

    return define


@pytest.fixture(autouse=True)
def _fresh_shared_connections() -> Iterator[None]:
    """Each test gets its own process-wide connections (they are keyed by store URL anyway)."""
    yield
    from partition_notify.integrations import shared

    shared.close_all()


@pytest.fixture(scope="session")
def dagster_available() -> None:
    require(_has("dagster"), f"dagster is not installed in {sys.executable}")
