"""The CLI in a child process with none of the caller's ``PN_*`` settings: what a
setting does is then what the test's own ``env`` (or ``.env`` in ``cwd``) says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.accounts import ROOT


def clean_cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PN_")}
    return subprocess.run(
        [sys.executable, "-m", "partition_notify.cli", *args],
        cwd=cwd, env={**clean, "PYTHONPATH": str(ROOT), **env}, text=True,
        capture_output=True, timeout=120, check=False)
