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
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ci import require
from tests.support.net import free_port

#: The push sink's Airflow user (simple auth manager).
USER, PASSWORD = "pn", "pn-push-secret"
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


#: The API server took 50-61 s to answer here with a load average of 17 on 2 cores.
START_TIMEOUT_SECONDS = 180.0


def _sync_dags() -> None:
    """Parse the DAG folder into the metadata DB (what the DAG processor does)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path,
                           bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:  # `airflow dags unpause`: paused DAGs are not queued
        session.execute(update(DagModel).where(DagModel.dag_id == "pn_orders_by_partition")
                        .values(is_paused=False))


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="session")
def airflow_api(airflow_home: Path) -> Iterator[str]:
    pw_file = airflow_home / "passwords.json"
    pw_file.write_text(f'{{"{USER}": "{PASSWORD}"}}')
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = f"{USER}:admin"
    os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] = str(pw_file)
    _sync_dags()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (airflow_home / "api-server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port",
         str(port), "--workers", "1", "--apps", "core"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    try:
        # Polling is the only readiness signal a separate HTTP server gives.
        while not _up(url):
            require(proc.poll() is None, f"airflow api-server exited: {proc.returncode}")
            require(time.monotonic() < deadline, "airflow api-server did not start in time")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
