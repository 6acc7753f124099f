"""scripts/install_stamp.py: what ``bootstrap.sh`` installs, given the last install's stamp.

The demo asks for ``spark`` alone (no test tools, drivers or browser); the test
suite for ``spark,dev``. Neither may leave the other without what it needs,
and neither reinstalls what is already there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.accounts import ROOT

SCRIPT = ROOT / "scripts" / "install_stamp.py"


def run(stamp: Path, want_hash: str, extras: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(stamp), want_hash, extras],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("stamp", "extras", "installs"), [
    (None, "spark", "spark"),                          # a new venv: what was asked
    (None, "spark,dev", "dev,spark"),
    ("h1 spark", "spark", ""),                         # the demo again: nothing
    ("h1 dev,spark", "spark", ""),                     # the demo after the tests: nothing
    ("h1 spark", "spark,dev", "dev,spark"),            # the tests after the demo: dev too
    ("h1 dev,spark", "spark,dev", ""),
    ("h0 dev,spark", "spark", "spark"),                # pyproject.toml changed: afresh
    ("h1", "spark,dev", ""),                           # the old stamp (hash alone) = spark,dev
    ("h0", "spark", "spark"),
    ("h1 iceberg", "spark", "iceberg,spark"),          # keeps what the venv had
])
def test_installs_what_the_stamped_install_lacks(
        tmp_path: Path, stamp: str | None, extras: str, installs: str) -> None:
    path = tmp_path / ".pn-installed"
    if stamp is not None:
        path.write_text(stamp + "\n")
    done = run(path, "h1", extras)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == installs


@pytest.mark.parametrize("extras", ["", ",", " "])
def test_no_extras_is_a_usage_error(tmp_path: Path, extras: str) -> None:
    done = run(tmp_path / "stamp", "h1", extras)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "usage: install_stamp.py STAMP HASH EXTRAS (EXTRAS: e.g. spark,dev)"]


def test_the_demo_asks_for_spark_alone_and_the_tests_for_dev() -> None:
    assert "PN_EXTRAS=spark bash scripts/bootstrap.sh" in (ROOT / "scripts/demo.sh").read_text()
    boot = (ROOT / "scripts/bootstrap.sh").read_text()
    assert "EXTRAS=${PN_EXTRAS:-spark,dev}" in boot
    assert "PN_EXTRAS" not in (ROOT / "scripts/test.sh").read_text()
