"""A simulated year of ``serve`` at the default retentions: rows per table and RSS.

    .venv/bin/python bench/year_soak.py [--days 365] [--store-url URL] [--per-day 4]

The driver is tests/support/soak_year.py (the soak test runs it for 40 days
with shortened retentions). Prints one Markdown row per 30 simulated days;
docs/reliability.md#retention-nothing-grows-forever has a run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.soak_year import simulate, table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--per-day", type=int, default=4, help="announces per table and day")
    p.add_argument("--store-url", default=None, help="default: a fresh SQLite file")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store_url or f"sqlite:///{tmp}/store.db"
        started = time.monotonic()
        samples = simulate(url, Path(tmp) / "spool", args.days, per_day=args.per_day)
        print(table(samples))
        print(f"\n{args.days} simulated days in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
