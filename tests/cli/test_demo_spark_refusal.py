"""``partition-notify demo`` when Spark cannot run: one line on stderr, exit 1.

Before, a missing Java gave two Python tracebacks (the pipeline's and the
waiting scheduler thread's) under the launcher's shell errors, and a workdir
the process cannot make gave an OSError traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from partition_notify.cli.entry import EXIT_ERROR
from tests.support.cli import clean_cli


def test_no_java_is_one_line_naming_java_home(tmp_path: Path) -> None:
    done = clean_cli(
        ["demo", "--workdir", str(tmp_path / "run")], tmp_path, JAVA_HOME=str(tmp_path / "no-jdk")
    )
    err = done.stderr.splitlines()
    assert done.returncode == EXIT_ERROR, done.stderr
    assert len(err) == 1, done.stderr
    assert "JAVA_HOME" in err[0] and "no-jdk" in err[0] and "--no-spark" in err[0], err[0]
    assert "Traceback" not in done.stderr
    assert "add-partition" not in done.stdout, "nothing was announced"


@pytest.mark.parametrize("spark", ["--spark", "--no-spark"])
def test_a_workdir_that_cannot_be_made_is_one_line(tmp_path: Path, spark: str) -> None:
    # Root ignores permissions: a regular file in the path refuses the directory the same way.
    (tmp_path / "afile").write_text("mine")
    done = clean_cli(["demo", spark, "--workdir", str(tmp_path / "afile" / "run")], tmp_path)
    err = done.stderr.splitlines()
    assert done.returncode == EXIT_ERROR, done.stderr
    assert len(err) == 1 and "afile/run" in err[0] and "workdir" in err[0], done.stderr
    assert (tmp_path / "afile").read_text() == "mine"
