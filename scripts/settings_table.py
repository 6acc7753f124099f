"""Rewrite the README's settings table from :class:`Settings` (``--check``: only
say whether it is up to date, exit 1 if not).

One row per setting: the variable, its default as the environment writes it,
the processes that read it (``partition_notify.settings.read_by``) and the
field's description. The table sits between the two markers below; everything
else in the README is left alone. tests/docs/test_settings_table.py runs the
check.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

from partition_notify.settings import Settings, read_by

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START = "<!-- settings-table:start (scripts/settings_table.py writes this) -->"
END = "<!-- settings-table:end -->"


def default_cell(value: object) -> str:
    """A default as one would write it in the environment."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if value == "":
        return "(empty)"
    return f"`{value}`"


def render() -> str:
    rows = ["| variable | default | read by | |", "|---|---|---|---|"]
    for name, info in Settings.model_fields.items():
        description = (info.description or "").replace("|", "\\|")
        rows.append(f"| `PN_{name.upper()}` | {default_cell(info.default)} | "
                    f"{', '.join(read_by(name))} | {description} |")
    return "\n".join(rows)


def rewrite(text: str) -> str:
    """``text`` with the table between the markers replaced by :func:`render`'s."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"README.md: markers {START!r} and {END!r} not found")
    return f"{head}{START}\n{render()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = README.read_text()
    wanted = rewrite(text)
    if "--check" in argv:
        if wanted != text:
            print("README.md: the settings table is out of date; run "
                  "python scripts/settings_table.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
