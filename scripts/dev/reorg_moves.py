#!/usr/bin/env python3
"""Rewrite old partition_notify module paths to their new rooms (issue #23, part A).

Usage: python3 scripts/dev/reorg_moves.py DIR   (plain python3, no dependencies; idempotent)

Kept for branches started before the reorganisation: run it on such a branch
after merging main. It never rewrites itself.

Rewrites, in every .py .md .toml .sh .txt .cfg .ini .yaml .yml file under DIR
(skipping .git, .venv*, build, *.egg-info):
  - ``from OLD import a, b as c`` (also parenthesised / multi-line), split per
    destination when the names of OLD went to several modules;
  - ``from PARENT import oldmod`` (``from partition_notify import cli_http``)
    -> ``from NEWPARENT import newmod as oldmod`` so call sites keep working;
  - any other dotted name: ``import OLD``, ``"partition_notify.service"``,
    ``logger="partition_notify.cli"``, ``partition_notify.errors.Foo``;
  - repository paths in text: ``partition_notify/cli_http.py``, ``store/http_store.py``.
Run ``ruff check --fix --select I`` afterwards: rewritten imports may need re-sorting.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# ---------------------------------------------------------------------------
# The move table: old module -> new module (whole module moved).
MODULES: dict[str, str] = {
    "partition_notify.errors": "partition_notify.core.errors",
    "partition_notify.limits": "partition_notify.core.limits",
    "partition_notify.backoff": "partition_notify.core.backoff",
    "partition_notify.redact": "partition_notify.core.redact",
    "partition_notify.api_roles": "partition_notify.core.api_roles",
    "partition_notify.cli_types": "partition_notify.cli.common",
    "partition_notify.cli_deadletters": "partition_notify.cli.deadletters",
    "partition_notify.cli_deadlines": "partition_notify.cli.deadlines",
    "partition_notify.cli_http": "partition_notify.cli.http",
    "partition_notify.cli_revisions": "partition_notify.cli.revisions",
    "partition_notify.cli_rev_commands": "partition_notify.cli.rev_commands",
    "partition_notify.cli_spark": "partition_notify.cli.spark",
    "partition_notify.demo": "partition_notify.cli.demo",
    "partition_notify.deadlines.jobs": "partition_notify.serve.jobs",
    "partition_notify.store.http_store": "partition_notify.http.store",
    "partition_notify.store.deadline_store": "partition_notify.deadlines.store",
    "partition_notify.store.commit_schema": "partition_notify.writers.commit_schema",
    "partition_notify.store.commit_repository": "partition_notify.writers.commit_repository",
}

# Split modules: old -> (where most names went, {name: (module, new name)}).
# partition_notify.cli became a package: ``main`` stays importable from it
# (the console script), the helpers went to cli.common under public names,
# the parser to cli.entry, the core commands (cmd_*) to cli.commands.
# store.http_schema / store.http_repositories: HTTP tables stay with http/,
# the deadline tables and repositories went to deadlines/.
# service: Service/run/JsonFormatter in serve.service; the jobs in serve.jobs.
SPLITS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "partition_notify.cli": ("partition_notify.cli.commands", {
        "main": ("partition_notify.cli", "main"),
        "build_parser": ("partition_notify.cli.entry", "build_parser"),
        "EXIT_ERROR": ("partition_notify.cli.entry", "EXIT_ERROR"),
        "EXIT_USAGE": ("partition_notify.cli.entry", "EXIT_USAGE"),
        "EXIT_TIMEOUT": ("partition_notify.cli.entry", "EXIT_TIMEOUT"),
        "DRIVER_LOGGERS": ("partition_notify.cli.entry", "DRIVER_LOGGERS"),
        "_Parser": ("partition_notify.cli.entry", "Parser"),
        "MAX_SECONDS": ("partition_notify.cli.common", "MAX_SECONDS"),
        "_app": ("partition_notify.cli.common", "open_app"),
        "_dump": ("partition_notify.cli.common", "dump"),
        "_table": ("partition_notify.cli.common", "table_arg"),
        "_seconds": ("partition_notify.cli.common", "seconds"),
        "_keys": ("partition_notify.cli.common", "keys_arg"),
    }),
    "partition_notify.service": ("partition_notify.serve.service", {
        "SQLITE_PURGE_BATCH": ("partition_notify.serve.jobs", "SQLITE_PURGE_BATCH"),
        "SQLITE_PURGE_PAUSE_SECONDS": ("partition_notify.serve.jobs",
                                       "SQLITE_PURGE_PAUSE_SECONDS"),
    }),
    "partition_notify.store.http_schema": ("partition_notify.http.schema", {
        n: ("partition_notify.deadlines.schema", n)
        for n in ("ExpectationRow", "ExpectationCheckRow", "MAX_TEMPLATE_CHARS")
    }),
    "partition_notify.store.http_repositories": ("partition_notify.http.repositories", {
        n: ("partition_notify.deadlines.repositories", n)
        for n in ("ExpectationRepository", "ExpectationCheckRepository")
    }),
    # Circles broken by moving one name down: the rest of each module stays.
    "partition_notify.store.records": ("partition_notify.store.records", {
        "InTxn": ("partition_notify.store.uow", "InTxn")}),
    "partition_notify.integrations.shared": ("partition_notify.integrations.shared", {
        "compatible": ("partition_notify.integrations.follow", "compatible")}),
}
# Old modules still importable under the same name (cli: now a package; the
# two above: most names stayed): a bare mention of them is left alone.
STILL_A_MODULE = {"partition_notify.cli", "partition_notify.store.records",
                  "partition_notify.integrations.shared"}

# Test files moved so tests mirror the source folders (folders by kind only for
# suites that cut across: contract, faults, fuzz, soak, security, docs,
# architecture). Folder renames, then single files; both as paths and dotted.
TEST_FOLDERS = {"tests/service": "tests/serve", "tests/brokers": "tests/transports"}
TEST_FILES = {
    **{f"tests/unit/{n}": f"tests/architecture/{n}" for n in (
        "test_import_layers", "test_one_namespace", "test_public_api", "test_service_markers")},
    **{f"tests/unit/{n}": f"tests/core/{n}" for n in ("test_backoff", "test_error_tree")},
    **{f"tests/unit/{n}": f"tests/contract/{n}" for n in ("test_messages", "test_spec_properties")},
    **{f"tests/unit/{n}": f"tests/transports/{n}" for n in (
        "test_hosts", "test_stomp_url", "test_transport_registry", "test_receipt_book")},
    "tests/unit/test_seq_window": "tests/subscriber/test_seq_window",
    "tests/core/test_gaps": "tests/subscriber/test_gaps",
    "tests/core/test_late_subscriber_race": "tests/subscriber/test_late_subscriber_race",
    "tests/core/test_subscriber_refs_and_wait": "tests/subscriber/test_subscriber_refs_and_wait",
    "tests/core/test_message_size": "tests/publisher/test_message_size",
}

#: Where a module's file is in the repository: these packages are folders at its top.
FOLDERS = ("store", "transports", "publisher", "subscriber", "revisions", "writers",
           "integrations")
SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".yaml", ".yml"}
SKIP_DIRS = {".git", "build", "dist", "node_modules", "__pycache__"}
# ---------------------------------------------------------------------------

OLD = set(MODULES) | set(SPLITS)
NEW = set(MODULES.values()) | {m for _d, names in SPLITS.values() for m, _n in names.values()} \
    | {d for d, _n in SPLITS.values()}


def _old_key(dotted: str) -> str | None:
    """The longest old module that ``dotted`` is or is inside."""
    best = None
    for old in OLD:
        inside = dotted == old or dotted.startswith(old + ".")
        if inside and (best is None or len(old) > len(best)):
            best = old
    return best


def _already_new(dotted: str, old: str) -> bool:
    # e.g. old "partition_notify.cli", text "partition_notify.cli.common": a new path.
    return any(n.startswith(old + ".") and (dotted == n or dotted.startswith(n + "."))
               for n in NEW)


def map_dotted(dotted: str) -> str:
    old = _old_key(dotted)
    if old is None or _already_new(dotted, old):
        return dotted
    rest = dotted[len(old) + 1:]
    if old in MODULES:
        return MODULES[old] + ("." + rest if rest else "")
    default, names = SPLITS[old]
    if not rest:
        return old if old in STILL_A_MODULE else default
    head, _, tail = rest.partition(".")
    module, name = names.get(head, (default, head))
    return f"{module}.{name}" + ("." + tail if tail else "")


def map_name(module: str, name: str) -> tuple[str, str]:
    """``from module import name`` -> (new module, new name)."""
    if f"{module}.{name}" in OLD:
        new = map_dotted(f"{module}.{name}")
        parent, _, last = new.rpartition(".")
        return parent, last
    if module in SPLITS:
        default, names = SPLITS[module]
        sub = f"{module}.{name}"
        if any(n == sub or n.startswith(sub + ".") for n in NEW):
            return module, name  # a submodule of the new package
        return names.get(name, (default, name))
    return map_dotted(module), name


_FROM = re.compile(
    r"^(?P<indent>[ \t]*)from[ \t]+(?P<module>partition_notify(?:\.\w+)*)[ \t]+import[ \t]+"
    r"(?P<names>\([^)]*\)|(?:[^\n\\#]|\\\n)+)(?P<comment>[ \t]*#[^\n]*)?$",
    re.MULTILINE,
)


def _rewrite_from(m: re.Match[str]) -> str:
    indent, module, raw = m["indent"], m["module"], m["names"]
    body = raw.strip().removeprefix("(").removesuffix(")").replace("\\\n", " ")
    body = re.sub(r"#[^\n]*", "", body)
    items = [p.split() for p in body.replace("\n", " ").split(",") if p.strip()]
    groups: dict[str, list[str]] = {}
    changed = False
    for item in items:
        name = item[0]
        alias = item[2] if len(item) == 3 else None
        new_mod, new_name = map_name(module, name)
        if (new_mod, new_name) != (module, name):
            changed = True
        local = alias or name
        groups.setdefault(new_mod, []).append(
            new_name if local == new_name else f"{new_name} as {local}")
    if not changed:
        return m[0]
    lines = []
    comment = m["comment"] or ""
    for mod, names in groups.items():
        line = f"{indent}from {mod} import {', '.join(names)}"
        if len(line) > 99:
            inner = "".join(f"{indent}    {n},\n" for n in names)
            line = f"{indent}from {mod} import (\n{inner}{indent})"
        lines.append(line)
    return "\n".join(lines) + comment


_DOTTED = re.compile(r"(?<![\w.])partition_notify(?:\.\w+)+")


def _path_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FOLDERS:
        parts = parts[1:]
    return "/".join(parts)


def _path_table() -> dict[str, str]:
    table = {}
    for old in OLD:
        new = map_dotted(old) if old not in SPLITS else SPLITS[old][0]
        table[_path_of(old) + ".py"] = _path_of(new) + ".py"
    return table


PATHS = _path_table()
_PATH = re.compile(r"(?<![\w/.])(?:" + "|".join(
    re.escape(p) for p in sorted(PATHS, key=len, reverse=True)) + r")(?![\w])")


def _test_pattern(old: str) -> re.Pattern[str]:
    # "tests/unit/test_x" as a path, "tests.unit.test_x" as a module; not inside a longer name.
    parts = old.split("/")
    return re.compile(r"(?<![\w/.])" + r"([/.])".join(re.escape(p) for p in parts) + r"(?![\w])")


_TESTS = [(_test_pattern(old), new) for old, new in (*TEST_FILES.items(), *TEST_FOLDERS.items())]


def _rewrite_tests(text: str) -> str:
    for pattern, new in _TESTS:
        def sub(m: re.Match[str], new: str = new) -> str:
            sep = m.group(1)
            return new.replace("/", sep)
        text = pattern.sub(sub, text)
    return text


def rewrite(text: str, suffix: str) -> str:
    text = _rewrite_tests(text)
    text = _FROM.sub(_rewrite_from, text)
    text = _DOTTED.sub(lambda m: map_dotted(m[0]), text)
    del suffix  # every kind of file names paths the same way
    text = _PATH.sub(lambda m: PATHS[m[0]], text)
    return text


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: moves.py DIR", file=sys.stderr)
        return 2
    root = Path(argv[1])
    changed = 0
    for path in sorted(root.rglob("*")):
        if path.resolve() == Path(__file__).resolve():
            continue
        rel = path.relative_to(root).parts
        if any(p in SKIP_DIRS or p.startswith(".venv") or p.endswith(".egg-info") for p in rel):
            continue
        if path.suffix not in SUFFIXES or not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        new = rewrite(text, path.suffix)
        if new != text:
            path.write_text(new)
            changed += 1
            print(path)
    print(f"{changed} file(s) rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
