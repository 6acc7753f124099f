"""The error tree drawn in partition_notify/core/errors.py is the real one, and complete.

Three checks: the drawing matches the classes (names and parents); no module
of the packages defines a user-facing error outside partition_notify.core.errors;
every error can be imported from ``partition_notify`` itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import partition_notify
from partition_notify.core import errors

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("partition_notify", "publisher", "subscriber", "store", "writers",
            "transports", "integrations", "revisions")
#: Exceptions that never reach a caller: each is raised and caught inside one layer
#: (or, for ApiProblem, turned into an HTTP problem response by the HTTP layer).
INTERNAL = {
    "partition_notify/http/problems.py": {"ApiProblem", "_TooLarge"},
    "partition_notify/deadlines/checker.py": {"_Covered"},
    "store/idempotency.py": {"IdempotentReplay"},
    "partition_notify/deadlines/store.py": {"AlreadyDecided"},
    "transports/stomp/_pending.py": {"ReceiptFailed", "ReceiptTimeout"},
    # Raised by the readers (and the follower's announce), caught by the follower: a gap,
    # a commit it cannot announce and a state it cannot load (both recorded as the
    # table's stop: lakehouse skip, or a repair).
    "writers/lakehouse/commits.py": {"Gap", "Unannounceable", "Unloadable"},
    "partition_notify/rules/retract.py": {"Stale"},  # rolls back a batch another serve won
    "partition_notify/rules/quiet.py": {"_NotQuiet"},  # rolls back a firing another serve made
    # Unwinds the app once the body-deadline 408 is sent; caught by the same middleware.
    "partition_notify/http/slow_clients.py": {"_BodyTimeout"},
}
_BRANCH = re.compile(r"── (?P<name>[A-Z]\w+)")


def drawn_tree() -> dict[str, str | None]:
    """``{class: parent}`` read from the module docstring's drawing."""
    assert errors.__doc__ is not None
    lines = [line for line in errors.__doc__.split("::", 1)[1].splitlines() if line.strip()]
    root = lines[0].split()[0]
    parents: dict[str, str | None] = {root: None}
    stack: list[tuple[int, str]] = [(-1, root)]  # (column of the name, name)
    for line in lines[1:]:
        match = _BRANCH.search(line)
        if match is None:
            if "│" not in line and "──" not in line:
                break  # the drawing ended
            continue  # a description carried over to the next line
        column = match.start("name")
        while stack[-1][0] >= column:
            stack.pop()
        parents[match["name"]] = stack[-1][1]
        stack.append((column, match["name"]))
    return parents


def real_tree() -> dict[str, str | None]:
    tree: dict[str, str | None] = {}
    for name, obj in vars(errors).items():
        if isinstance(obj, type) and issubclass(obj, errors.PartitionNotifyError):
            base = next((b for b in obj.__bases__
                         if issubclass(b, errors.PartitionNotifyError)), None)
            tree[name] = base.__name__ if base else None
    return tree


def test_the_drawing_is_the_class_tree() -> None:
    drawn = drawn_tree()
    assert "CommitIncompleteError" in drawn  # the parser really read the drawing
    assert drawn == real_tree()


def test_no_error_class_is_defined_outside_the_errors_module() -> None:
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "partition_notify/core/errors.py" or "/migrations/" in rel:
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if isinstance(node, ast.ClassDef) and _looks_like_exception(node):
                    found.setdefault(rel, set()).add(node.name)
    assert found == INTERNAL


def _looks_like_exception(node: ast.ClassDef) -> bool:
    names = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
    known = set(real_tree()) | {"Exception", "BaseException", "HTTPException",
                                "StarletteHTTPException", "ValueError", "LookupError",
                                "TimeoutError", "RuntimeError", "OSError"}
    return bool(names & known)


def test_every_error_is_importable_from_the_package() -> None:
    for name in real_tree():
        assert name in partition_notify.__all__
        assert getattr(partition_notify, name) is getattr(errors, name)
