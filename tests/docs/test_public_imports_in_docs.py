"""The README's and docs' examples import the public names from ``partition_notify``."""

from __future__ import annotations

import re
from pathlib import Path

import partition_notify

ROOT = Path(__file__).resolve().parents[2]
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
FROM_IMPORT = re.compile(r"^\s*from ([\w.]+) import \(?([\w ,]+)\)?", re.M)


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def detours(text: str) -> list[str]:
    """``from X import Name`` lines where Name is public but X is not ``partition_notify``."""
    found = []
    for block in PYTHON_BLOCK.findall(text):
        for module, names in FROM_IMPORT.findall(block):
            public = {n.strip() for n in names.split(",")} & set(partition_notify.__all__)
            if module != "partition_notify" and public:
                found.append(f"from {module} import {', '.join(sorted(public))}")
    return found


def test_examples_import_public_names_from_the_package() -> None:
    bad = {doc.name: detours(doc.read_text()) for doc in _documents()}
    assert {name: lines for name, lines in bad.items() if lines} == {}


def test_a_detour_is_found() -> None:
    text = ("```python\nfrom partition_notify.writers import NotifyingWriter\n"
            "from partition_notify.store import Store\n```\n")
    assert detours(text) == ["from partition_notify.writers import NotifyingWriter"]
    assert detours("```python\nfrom partition_notify import build_app\n```\n") == []
