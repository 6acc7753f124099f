"""How many inputs each fuzz target tries, and the per-target report.

``PN_FUZZ_EXAMPLES`` is the total across targets (default 100,000); each
target gets a fixed share. Counts are of inputs actually run (the target
body increments its counter), printed per target and appended to
``PN_FUZZ_COUNT_FILE`` (default /tmp/partition-notify-fuzz.txt).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings

TOTAL = int(os.environ.get("PN_FUZZ_EXAMPLES", "100000"))
SHARES = {
    "spec-parser": 0.302,
    "spec-mapping": 0.08,
    "message-decode-bytes": 0.15,
    "message-decode-mutated": 0.20,
    "topic-naming": 0.18,
    "subscriber-dispatch": 0.083,
    "subscriber-wire": 0.002,
    "cli-argv": 0.003,  # each run opens the store: ~10-50 ms
}
#: Inputs per hypothesis example: its per-example overhead dwarfs a parser call,
#: so each example is a batch made from the example's Random (tests/fuzz/gen.py).
BATCH = {"cli-argv": 1, "subscriber-dispatch": 50}
DEFAULT_BATCH = 100


def examples(target: str) -> int:
    """Inputs this target should try."""
    return max(1, int(TOTAL * SHARES[target]))


def batch(target: str) -> int:
    return BATCH.get(target, DEFAULT_BATCH)


def fuzz_settings(target: str) -> settings:
    return settings(
        max_examples=max(1, -(-examples(target) // batch(target))),
        deadline=None,
        database=None,  # reproducible from the seed printed on failure, no state on disk
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )


@dataclass
class Counter:
    target: str
    n: int = 0
    started: float = field(default_factory=time.monotonic)
    outcomes: dict[str, int] = field(default_factory=dict)

    def hit(self, outcome: str) -> None:
        self.n += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def report(self) -> str:
        took = time.monotonic() - self.started
        detail = " ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items()))
        line = f"[fuzz] target={self.target} inputs={self.n} seconds={took:.1f} {detail}"
        print(line, flush=True)
        with suppress(OSError), open(Path(os.environ.get(
                "PN_FUZZ_COUNT_FILE", "/tmp/partition-notify-fuzz.txt")), "a") as fh:
            fh.write(line + "\n")
        return line


def run(target: str, test: Callable[[Counter], Callable[..., Any]]) -> Counter:
    """Run a hypothesis test built by ``test(counter)``; report the count."""
    counter = Counter(target)
    test(counter)()
    counter.report()
    return counter
