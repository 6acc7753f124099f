"""A rule that cannot be evaluated says so once per cause, not at every run.

Defect: a rule whose input table was unregistered (as `unregister` allowed
until it refused it) logged "evaluation failed" at every rules run of serve,
every PN_RULES_INTERVAL_SECONDS (5 s), for ever: 17,280 lines a day. Real
SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import logging

import pytest

from partition_notify import build_app
from partition_notify.rules.evaluator import Evaluator


def _failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "evaluation failed" in r.getMessage()]


def test_a_failing_rule_is_logged_once_until_it_recovers(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="partition_notify.rules.evaluator")
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        for table in ("a", "b", "out"):
            app.publisher.register_table("lg", table, ["ds"])
        app.rules.add("lg.out", name="both", kind="cross-table",
                      params={"inputs": ["lg.a", "lg.b"], "by": ["ds"]})
        app.publisher.unregister_table("lg", "a")  # the state older stores may hold
        evaluator = Evaluator(app.store, app.publisher)
        for _ in range(3):
            evaluator.run_once()
        assert len(_failures(caplog)) == 1, _failures(caplog)
        assert "lg.a is not registered" in _failures(caplog)[0]
        app.publisher.register_table("lg", "a", ["ds"])
        evaluator.run_once()
        assert any("evaluates again" in r.getMessage() for r in caplog.records)
        app.publisher.unregister_table("lg", "a")
        evaluator.run_once()
        assert len(_failures(caplog)) == 2, "a new failure after a recovery is logged"
