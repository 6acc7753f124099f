"""``partition-notify serve`` (the real CLI) that stops itself after N relay runs.

Usage: python -m tests.serve._idle_serve RUNS. The relay's ``run_once`` is
wrapped to count; after RUNS runs the process sends itself SIGTERM, so the
idle log is measured over a bounded number of job runs, not a wall time.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from partition_notify.publisher.relay import Relay

from partition_notify.cli import main


def _count(runs: int) -> None:
    original = Relay.run_once
    lock = threading.Lock()
    seen = [0]

    def counted(self: Relay) -> int:
        n = original(self)
        with lock:
            seen[0] += 1
            if seen[0] == runs:
                os.kill(os.getpid(), signal.SIGTERM)
        return n

    Relay.run_once = counted  # type: ignore[method-assign]


if __name__ == "__main__":
    _count(int(sys.argv[1]))
    sys.exit(main(["serve"]))
