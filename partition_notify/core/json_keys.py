"""JSON documents whose objects repeat a key: found, so callers refuse them.

``json.loads`` keeps the last of a repeated key's values, other parsers the
first: a body a reviewer (or a proxy, or a signing step) read one way was
stored another. The HTTP API refuses such request bodies, serve such commit
manifests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from partition_notify.core.limits import excerpt


@dataclass(frozen=True, slots=True)
class RepeatedKey:
    """The first object (in document order) that has ``key`` ``count`` times."""

    path: tuple[str | int, ...]  # keys and list indexes from the top to the object
    key: str
    count: int

    def where(self, root: str) -> str:
        """The object's path written ``root.a.0.b`` (long keys cut short)."""
        return ".".join((root, *(_part(p) for p in self.path)))

    def field(self, root: str) -> str:
        """The repeated key's path: ``root.a.0.b.key``."""
        return f"{self.where(root)}.{_part(self.key)}"

    @property
    def what(self) -> str:
        return (f"key {excerpt(self.key)} appears {self.count} times in one JSON object; "
                "expected each key once (parsers differ in which value they keep)")


def _part(p: str | int) -> str:
    return excerpt(p, shown=p) if isinstance(p, str) else str(p)


class _Repeats(dict[str, object]):
    """An object built from pairs that repeat a key (the last value kept, as json does)."""

    repeated: tuple[str, int]


def loads(raw: bytes | str) -> tuple[object, RepeatedKey | None]:
    """``json.loads(raw)`` and the first repeated key, if any; raises what it raises."""
    seen = False

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal seen
        obj = dict(items)
        if len(obj) == len(items):
            return obj
        seen = True
        keys = [k for k, _ in items]
        first = _first_repeated(keys)
        repeats = _Repeats(obj)
        repeats.repeated = (first, keys.count(first))
        return repeats

    doc = json.loads(raw, object_pairs_hook=pairs)
    return doc, (_first(doc) if seen else None)


def _first_repeated(keys: list[str]) -> str:
    met: set[str] = set()
    for key in keys:
        if key in met:
            return key
        met.add(key)
    raise AssertionError("unreachable: called only for keys with a repeat")


def _first(doc: object) -> RepeatedKey | None:
    # A stack, not recursion: json.loads takes nesting deeper than Python's stack.
    stack: list[tuple[tuple[str | int, ...], object]] = [((), doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, _Repeats):
            return RepeatedKey(path, *node.repeated)
        if isinstance(node, dict):
            children = [((*path, k), v) for k, v in node.items()]
        elif isinstance(node, list):
            children = [((*path, i), v) for i, v in enumerate(node)]
        else:
            continue
        stack.extend(reversed(children))  # popped in document order
    return None
