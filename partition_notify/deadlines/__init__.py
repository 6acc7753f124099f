"""Partition deadlines: expectations per table, checked by ``serve`` at each deadline.

If no covering set-done exists at an instance's deadline, a ``PARTITION_LATE``
message goes out on the table's topic (same envelope, headers and outbox as
every message); a set-done arriving later brings ``PARTITION_LATE_RECOVERED``.
Schedule semantics: :mod:`partition_notify.deadlines.schedule`; the Python
API: ``app.deadlines`` (:class:`partition_notify.deadlines.api.Deadlines`);
the checker: :mod:`partition_notify.deadlines.checker`. Nothing heavy is
imported here: the CLI imports the schedule module at start-up.
"""
