"""Simulated months of ``serve`` under a steady load: every table's rows and the RSS level off.

Retentions are shortened to 10 days so 40 simulated days show the plateau
(from day 20 on); the year at the default retentions is ``bench/year_soak.py``.

tests/support/soak_year.py drives it (announces, set-dones, HTTP writes, Spark
commits, an expectation, spool leftovers; every serve job once per simulated
day); ``bench/year_soak.py`` is the longer run whose numbers are in
docs/reliability.md. ``pn_partitions`` is the catalog (one row per partition
ever announced): it grows with the data by design and is checked to grow
exactly by the load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.accounts import ROOT
from tests.support.soak_year import DAY, Sample, table

DAYS = 40
PER_DAY = 4  # simulate()'s default
SHORT = int(10 * DAY)


def test_a_year_of_serve_levels_off(store_url: str, tmp_path: Path) -> None:
    settings = {f"{k}_retention_seconds": SHORT
                for k in ("event_log", "spark_commit", "expectation_check", "spool")}
    # A process of its own: its RSS is serve's, not the test runner's.
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.soak_year", store_url, str(tmp_path),
         str(DAYS), "10", json.dumps(settings)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    samples = [Sample(**s) for s in json.loads(done.stdout.splitlines()[-1])]
    print("\n" + table(samples))
    by_day = {s.day: s for s in samples}
    mid, end = by_day[DAYS // 2], by_day[DAYS]
    for name, n in end.rows.items():
        if name == "pn_partitions":
            # 3 tables x PER_DAY announces + 1 Spark partition a day, never purged.
            assert n == DAYS * (3 * PER_DAY + 1), n
            continue
        assert n <= mid.rows[name] * 1.05 + 3, f"{name} grew: {mid.rows[name]} -> {n}"
        assert n <= 1000, f"{name}: {n} rows"
    assert end.spool_files <= mid.spool_files
    assert end.rss_mb <= mid.rss_mb + 15, f"RSS {mid.rss_mb:.0f} -> {end.rss_mb:.0f} MB"
