"""Exactly once into Airflow: a redelivered set-done never makes a second asset event.

Real ``airflow api-server`` and metadata DB (tests/integrations/conftest.py),
real SQLite store. Push sink: the redelivery is an operator's redrive of an
event dead-lettered as "could not say" (Airflow 3.3.2 could not list it while
its run was queued) that Airflow had in fact received.
"""

from __future__ import annotations

from typing import Any

from tests.integrations.test_airflow_push_poison import (  # noqa: F401  (fixtures)
    Crash,
    _airflow_events,
    _queue_a_run_for,
    _sink,
    _start_run,
    pn_app,
    queued,
)


def test_redriving_a_letter_airflow_already_has_sends_nothing(
        pn_app: Any, airflow_api: str, queued: list[str]) -> None:  # noqa: F811
    import pytest

    assets: dict[str, str | int] = {"sales.orders": "sales_orders"}
    _sink(pn_app, airflow_api, assets).run_once()
    msg = pn_app.publisher.send_mark_set_done("sales", "orders", "datestamp=20110420/region=us")
    with pytest.raises(Crash):
        _sink(pn_app, airflow_api, assets, crash=True).run_once()  # POSTed, then died
    run_id = _queue_a_run_for(msg.message_id)
    queued.append(run_id)
    restarted = _sink(pn_app, airflow_api, assets, settle_timeout_seconds=0.001)
    restarted.run_once()
    (letter,) = restarted.letters.find()
    assert "could not say" in letter.error
    _start_run(run_id)  # Airflow can list the event again
    restarted.letters.redrive(None)  # `dead-letters redrive --source airflow-push`
    restarted.run_once()
    (event,) = _airflow_events(msg.message_id)  # main: two asset events, two runs
    assert event.extra["key"].startswith(f"sales.orders:{msg.event_id}:")
    assert restarted.recovered == 1 and restarted.letters.find() == []
