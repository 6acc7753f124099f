"""Every ``partition-notify`` command the README and docs show parses with the real CLI.

A user copies these lines: a flag renamed in the code, or an option that never
existed, must fail here, not on their terminal. Lines in code blocks must parse
whole; an inline mention (`partition-notify tail`) may leave out required
arguments, but every flag and sub-command it names must exist. Lines with
placeholders (`[--x]`, `a|b`, `…`, `N`, `FILE`, `$VAR`) are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from functools import cache
from pathlib import Path

from partition_notify.cli.entry import build_parser

ROOT = Path(__file__).resolve().parents[2]
INLINE = re.compile(r"`(partition-notify [^`]+)`")
PLACEHOLDER = re.compile(r"[\[|…<$]|\.\.\.|\b[A-Z][A-Z.]*\b(?!=)")
MISSING_ONLY = "the following arguments are required"
#: Quoted output that starts with the program's name, not a command: the commit
#: protocol's refusals (docs/writers.md, "Refused settings").
OUTPUT = ("partition-notify refused the write:",)


def _documents() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "benchmarks.md")
    return [ROOT / "README.md", *docs]


def commands(text: str) -> list[tuple[str, bool]]:
    """(command, inline) for every ``partition-notify`` command in ``text``."""
    found = [(m, True) for m in INLINE.findall(text)]
    lines, in_block, i = text.splitlines(), False, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = not in_block
        elif in_block and "partition-notify " in line:
            cmd = line[line.index("partition-notify "):]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
            found.append((cmd, False))
        i += 1
    out = []
    for cmd, inline in found:
        if cmd.startswith(OUTPUT):
            continue
        cmd = re.sub(r"\s#.*$", "", cmd).split(";")[0].strip().rstrip(")")
        args = cmd.split(" ", 1)[1] if " " in cmd else ""
        if args and not PLACEHOLDER.search(args):
            out.append((cmd, inline))
    return out


@cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def refusal(cmd: str, inline: bool) -> str | None:
    """The CLI's usage error for ``cmd``, or None when it parses."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _parser().parse_args(shlex.split(cmd)[1:])
    except SystemExit as exc:
        message = err.getvalue().strip().splitlines()[-1] if err.getvalue() else str(exc)
        if exc.code and not (inline and MISSING_ONLY in message):
            return message
    return None


def test_documented_commands_parse() -> None:
    bad, checked = [], 0
    for doc in _documents():
        for cmd, inline in commands(doc.read_text()):
            checked += 1
            message = refusal(cmd, inline)
            if message:
                bad.append(f"{doc.name}: {cmd}: {message}")
    assert bad == []
    assert checked > 60


def test_a_wrong_flag_is_found() -> None:
    text = "```bash\npartition-notify wait db.t a=1 --timout 5   # typo\n```\n"
    [(cmd, inline)] = commands(text)
    assert "unrecognized arguments: --timout" in (refusal(cmd, inline) or "")
    assert commands("`partition-notify rev commit|abort db.t N`") == []
    [(cmd, inline)] = commands("`partition-notify tail`")
    assert refusal(cmd, inline) is None
    assert commands("`partition-notify refused the write: spark.x 'y' refused`") == []
