"""``serve``: the deadline check, at every next deadline and on an interval."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from partition_notify.deadlines.checker import DeadlineChecker, DeadlineMetrics
from partition_notify.errors import PartitionNotifyError

if TYPE_CHECKING:
    from partition_notify.service import Service

log = logging.getLogger(__name__)
#: Run a little after the deadline itself: a set-done committed in the very
#: last moment is then visible.
AFTER_DEADLINE_SECONDS = 0.5


def schedule_deadline_checks(service: Service) -> DeadlineChecker:
    """Add the jobs to ``service.scheduler``; returns the checker they run."""
    app = service.app
    checker = DeadlineChecker(app, metrics=DeadlineMetrics(service.metrics.registry))

    def job() -> None:
        try:
            report = checker.check()
            if report.late or report.recovered:
                log.info("deadline check: %d late, %d recovered", len(report.late),
                         len(report.recovered))
            nxt = checker.next_deadline()
        except PartitionNotifyError as exc:
            log.warning("deadline check failed: %s", exc, extra={"pn_event": "deadline.failed"})
            return
        if nxt is not None and not service.relay.stopping.is_set():
            service.scheduler.add_job(
                job, "date", id="deadline-next", replace_existing=True,
                run_date=datetime.fromtimestamp(nxt + AFTER_DEADLINE_SECONDS, UTC),
            )

    service.scheduler.add_job(
        job, "interval", id="deadlines", next_run_time=datetime.now(UTC),
        seconds=app.settings.deadline_check_interval_seconds,
    )
    return checker
