"""The layers of docs/architecture.md, enforced: each may import only the layers below it.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``
(a type-only import is still a dependency a reader must follow). A layer is a
folder (or a root module); there are no exceptions, and no circles between
modules either. Only the ways in (cli, serve, http, integrations) receive an
``App``; the layers below it name the parts they take.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Folder at the top of the repository -> the package it installs as.
PACKAGES = {"partition_notify": "partition_notify", **{
    folder: f"partition_notify.{folder}" for folder in (
        "store", "transports", "publisher", "subscriber", "revisions", "writers",
        "integrations")}}

#: Layer -> its folder (or root module); a module belongs to the layer whose
#: prefix is the longest that matches it. No exceptions: no entry is a file
#: inside another layer's folder.
LAYERS: dict[str, str] = {
    "core": "partition_notify.core",
    "contract": "partition_notify.contract",
    "settings_checks": "partition_notify.settings_checks",
    "settings": "partition_notify.settings",
    "metrics": "partition_notify.metrics",
    "store": "partition_notify.store",
    "transports": "partition_notify.transports",
    "publisher": "partition_notify.publisher",
    "subscriber": "partition_notify.subscriber",
    "revisions": "partition_notify.revisions",
    "writers": "partition_notify.writers",
    "deadlines": "partition_notify.deadlines",
    "rules": "partition_notify.rules",
    "app": "partition_notify.app",
    "http": "partition_notify.http",
    "integrations": "partition_notify.integrations",
    "serve": "partition_notify.serve",
    "cli": "partition_notify.cli",
    # The package itself: the public names, re-exported lazily from every layer.
    "api": "partition_notify",
}
_GROUND = {"core", "contract", "settings"}
#: Layer -> the layers it may import (besides itself): only ones listed before it.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "contract": {"core"},
    "settings_checks": {"core", "contract"},
    "settings": {"core", "contract", "settings_checks"},
    "metrics": {"core"},
    "store": {"core", "contract"},
    "transports": _GROUND | {"store"},
    "publisher": _GROUND | {"store", "transports"},
    "subscriber": _GROUND | {"store", "transports"},
    "revisions": _GROUND | {"store"},
    "writers": _GROUND | {"store", "publisher", "revisions"},
    "deadlines": _GROUND | {"store", "publisher", "subscriber"},
    "rules": _GROUND | {"store", "publisher", "subscriber"},
    "app": _GROUND | {"store", "transports", "publisher", "subscriber", "revisions", "writers",
                      "deadlines", "rules"},
    "http": _GROUND | {"metrics", "store", "publisher", "subscriber", "revisions", "writers",
                       "deadlines", "rules", "app"},
    "integrations": _GROUND | {"store", "transports", "subscriber", "app"},
    "serve": set(LAYERS) - {"cli", "api"},
    "cli": set(LAYERS) - {"api"},
    "api": set(LAYERS),
}


def layer_of(module: str) -> str | None:
    best: tuple[int, str] | None = None
    for layer, prefix in LAYERS.items():
        inside = module == prefix or (module.startswith(prefix + ".") and layer != "api")
        if inside and (best is None or len(prefix) > best[0]):
            best = (len(prefix), layer)
    return best[1] if best else None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = PACKAGES[parts[0]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_path(name: str) -> Path:
    """The file or folder (without ``.py``) that module ``name`` is in the repository."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in PACKAGES and parts[1] != "partition_notify":
        parts = parts[1:]
    return ROOT.joinpath(*parts)


def _is_module(name: str) -> bool:
    path = module_path(name)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path) -> dict[str, bool]:
    """Our modules ``path`` imports -> whether only under ``TYPE_CHECKING``.

    ``from pkg import mod`` counts as ``pkg.mod`` when ``mod`` is a module.
    """
    tree = ast.parse(path.read_text(), str(path))
    type_only = {id(n) for block in ast.walk(tree)
                 if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
                 for stmt in block.body for n in ast.walk(stmt)}
    found: dict[str, bool] = {}
    for node in ast.walk(tree):
        names: set[str] = set()
        if isinstance(node, ast.Import):
            names = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            names = {s for s in subs if _is_module(s)} or {node.module}
        for name in names:
            if name.split(".")[0] == "partition_notify":
                found[name] = found.get(name, True) and id(node) in type_only
    return found


def _our_modules() -> dict[str, Path]:
    return {_module_name(path): path for folder in PACKAGES
            for path in sorted((ROOT / folder).rglob("*.py")) if "migrations" not in path.parts}


def forbidden_edges() -> list[str]:
    bad = []
    for importer, path in _our_modules().items():
        source = layer_of(importer)
        assert source is not None, f"{importer} is in no layer: add its folder to LAYERS"
        for imported in sorted(imports_of(path)):
            target = layer_of(imported)
            assert target is not None, f"{imported} is in no layer: add its folder to LAYERS"
            if target != source and target not in ALLOWED[source]:
                bad.append(f"{importer} ({source}) imports {imported} ({target})")
    return bad


def import_circles(modules: dict[str, Path] | None = None) -> list[list[str]]:
    """Groups of our modules that import each other, directly or around a circle.

    Type-only imports count: a reader follows them too. A package's
    ``__init__`` importing its own modules is the package, not a circle.
    """
    modules = _our_modules() if modules is None else modules
    graph = {m: sorted(i for i in imports_of(p) if i in modules and not i.startswith(m + "."))
             for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_no_layer_imports_a_layer_above_it() -> None:
    assert forbidden_edges() == []


def test_no_import_circle() -> None:
    assert import_circles() == []


def test_the_check_sees_a_circle(tmp_path: Path) -> None:
    # records -> uow (type-only) -> records: the circle this test was written for.
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    import partition_notify.store.uow\n")
    b.write_text("from partition_notify.store.records import Clock\n")
    c.write_text("import partition_notify.store.uow\n")
    modules = {"partition_notify.store.records": a, "partition_notify.store.uow": b,
               "partition_notify.store.other": c}
    assert import_circles(modules) == [["partition_notify.store.records",
                                        "partition_notify.store.uow"]]


def test_the_check_sees_a_forbidden_edge(tmp_path: Path) -> None:
    # A store module reaching up into the publisher must be caught.
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\n"
                     "from partition_notify.publisher import Publisher\n"
                     "import partition_notify.store.schema\n"
                     "if TYPE_CHECKING:\n    from partition_notify.store import uow\n")
    imported = imports_of(probe)
    assert imported == {"partition_notify.publisher": False,
                        "partition_notify.store.schema": False,
                        "partition_notify.store.uow": True}
    assert layer_of("partition_notify.store.provider") == "store"
    assert "publisher" not in ALLOWED[layer_of("partition_notify.store.provider") or ""]
    assert layer_of("partition_notify.cli.http") == "cli"
    assert layer_of("partition_notify.contract.messages") == "contract"
    assert layer_of("partition_notify") == "api"


def test_the_architecture_page_names_every_layer() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## The layers", 1)[1].split("\n\n", 2)[1]
    for layer, prefix in LAYERS.items():
        if layer == "api":
            continue  # the package itself: its own section
        shown = f"`{prefix.replace('.', '/')}" in table or f"`{prefix.rsplit('.', 1)[-1]}" in table
        assert shown, f"layer {layer} ({prefix}) is not in docs/architecture.md's table"
