"""Which extras ``scripts/bootstrap.sh`` must install into .venv, from its stamp file.

    python3 scripts/install_stamp.py STAMP HASH EXTRAS

The stamp holds ``HASH EXTRAS`` of the last install (HASH: pyproject.toml's
sha256; EXTRAS: comma-separated, sorted). Prints nothing when that install
already has every extra asked for with today's pyproject.toml; otherwise the
extras to install now: the ones asked for, plus the stamp's own while the hash
is the same (so the demo's ``spark`` after the tests' ``spark,dev`` installs
nothing, and the tests after the demo keep ``spark``). A stamp of the old
format (the hash alone) stood for ``spark,dev``.

Standard library only: it runs on the system Python before .venv exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: What a stamp without an extras field (written before they were recorded) installed.
OLD_STAMP_EXTRAS = frozenset({"spark", "dev"})


def extras(text: str) -> frozenset[str]:
    return frozenset(e.strip() for e in text.split(",") if e.strip())


def to_install(stamp: str | None, want_hash: str, wanted: frozenset[str]) -> frozenset[str]:
    """The extras to install now; empty when the stamped install already has them."""
    if not stamp:
        return wanted
    have_hash, _, have_extras = stamp.strip().partition(" ")
    if have_hash != want_hash:
        return wanted
    have = extras(have_extras) if have_extras else OLD_STAMP_EXTRAS
    return frozenset() if wanted <= have else wanted | have


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not extras(argv[2]):
        print("usage: install_stamp.py STAMP HASH EXTRAS (EXTRAS: e.g. spark,dev)",
              file=sys.stderr)
        return 2
    path, want_hash, wanted = Path(argv[0]), argv[1], extras(argv[2])
    stamp = path.read_text() if path.is_file() else None
    print(",".join(sorted(to_install(stamp, want_hash, wanted))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
