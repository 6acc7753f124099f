"""The spool sweep ages a set-aside file by the file itself, never by what a symbolic
link points at. A manifest that is a link is set aside as a link (``f.json.rejected``,
not followed: tests/spark_protocol/test_spool_trust.py); the sweep followed it, so a
link to an old file (/dev/zero here dates from the machine's image) was deleted at once
instead of after ``PN_SPOOL_RETENTION_SECONDS``: the spool-trust test then waited for a
``.rejected`` file that serve's sweep had removed (a CI failure, 2026-11-30)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from partition_notify.writers.commit_spool import sweep

WEEK = 7 * 86400.0


def test_a_link_is_aged_by_its_own_time_not_its_targets(tmp_path: Path) -> None:
    old = tmp_path / "old-target"
    old.write_text("x")
    month_ago = time.time() - 30 * 86400
    os.utime(old, (month_ago, month_ago))
    spool = tmp_path / "_partition_notify"
    spool.mkdir()
    (spool / "f.json.rejected").symlink_to(old)
    (spool / "g.json.rejected").symlink_to("/dev/zero")
    (spool / ".job.json.tmp").symlink_to(old)

    swept = sweep([spool], time.time() - WEEK)

    assert swept.removed == 0
    assert sorted(p.name for p in spool.iterdir()) == [
        ".job.json.tmp", "f.json.rejected", "g.json.rejected"]
    assert swept.rejected == 2 and swept.partial == 1


def test_an_old_link_goes_and_its_target_stays(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("x")  # new: the link's own age decides
    spool = tmp_path / "_partition_notify"
    spool.mkdir()
    link = spool / "f.json.rejected"
    link.symlink_to(target)
    month_ago = time.time() - 30 * 86400
    os.utime(link, (month_ago, month_ago), follow_symlinks=False)

    swept = sweep([spool], time.time() - WEEK)

    assert swept.removed == 1 and not os.path.lexists(link)
    assert target.read_text() == "x"
