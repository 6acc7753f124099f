"""partition-notify: event-driven partition-completion notifications for Spark pipelines.

Importing this package builds nothing (no engine, no settings): wiring happens
in :func:`partition_notify.app.build_app`.
"""

__version__ = "0.1.0"
