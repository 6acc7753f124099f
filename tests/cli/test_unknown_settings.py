"""A misspelled ``PN_*`` variable is warned about, one line naming it and the
closest setting, instead of being silently ignored (issue 24). Real CLI process."""

from __future__ import annotations

import subprocess

from partition_notify import build_app
from tests.support.accounts import ROOT
from tests.support.cli import clean_cli


def _tables(store_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    build_app(store_url=store_url).close()  # the store exists: `tables` only reads
    return clean_cli(["--store-url", store_url, "tables"], ROOT, **env)


def test_a_misspelled_setting_is_one_warning_naming_the_closest(sqlite_url: str) -> None:
    done = _tables(sqlite_url, PN_PUBLISH_TIMEOUT_SECOND="3", PN_WRITER_TOKEN="t",
                   PN_ICEBERG_CATALOG__LAKE__URI="http://x", PN_TOPIC_POLICY="per-table")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "not a partition-notify" in line]
    assert warnings == [
        "PN_PUBLISH_TIMEOUT_SECOND is not a partition-notify setting and is ignored; "
        "did you mean PN_PUBLISH_TIMEOUT_SECONDS?"], done.stderr


def test_known_settings_are_not_warned_about(sqlite_url: str) -> None:
    done = _tables(sqlite_url, PN_TOPIC_POLICY="per-table", PN_WRITER_TOKEN="t",
                   PN_AIRFLOW_URL="http://a", PN_METRICS_BIND="127.0.0.1")
    assert done.returncode == 0, done.stderr
    assert "not a partition-notify setting" not in done.stderr, done.stderr


def test_a_misspelled_airflow_push_setting_is_warned_about_too(sqlite_url: str) -> None:
    # PN_AIRFLOW_URLL left the push sink off without a word (the whole prefix was skipped).
    done = _tables(sqlite_url, PN_AIRFLOW_URLL="http://airflow:8080",
                   PN_AIRFLOW_ASSETS='{"sales.orders": "orders"}')
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "not a partition-notify" in line]
    assert warnings == [
        "PN_AIRFLOW_URLL is not a partition-notify setting and is ignored; "
        "did you mean PN_AIRFLOW_URL?"], done.stderr


def test_the_airflow_push_variables_are_the_sinks_fields() -> None:
    # The settings layer cannot import the integration: its list must follow the fields.
    from partition_notify.integrations.airflow.push_settings import PREFIX, AirflowPushSettings

    from partition_notify.settings_checks import AIRFLOW_PUSH_VARIABLES

    fields = frozenset(f"{PREFIX}{name.upper()}" for name in AirflowPushSettings.model_fields)
    assert fields == AIRFLOW_PUSH_VARIABLES
