"""The ``partition-notify`` command line: one module per command group.

``entry`` builds the parser from the groups and runs a command; ``common``
holds what the groups share (open the App, dump a message, argument types).
A group never imports ``entry``.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse ``argv`` (default ``sys.argv[1:]``), run, return the exit code."""
    from partition_notify.cli.entry import main as run

    return run(argv)
