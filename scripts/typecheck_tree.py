"""Lay out build/typecheck/partition_notify as installed (symlinks) for mypy.

The layer folders sit at the top of the repository but install as
``partition_notify.<layer>`` (pyproject's package-dir); mypy follows folders,
not package-dir, so it reads this tree (``mypy_path``). Symlinks to folders,
so files added later are seen without running this again; run by
scripts/test.sh before mypy.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "typecheck"


def main() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = config["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(TREE, ignore_errors=True)
    top = TREE / "partition_notify"
    top.mkdir(parents=True)
    for entry in (ROOT / "partition_notify").iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in mapped.items():
        (top / package.split(".", 1)[1]).symlink_to(ROOT / folder)


if __name__ == "__main__":
    main()
