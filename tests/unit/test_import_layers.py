"""The layers of docs/architecture.md, enforced: each may import only the layers below it.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``
(a type-only import is still a dependency a reader must follow), with one
rule for the last: any layer may name the composition root's ``App`` in a
type-only import, because the App is handed to it as an argument. The few
other deliberate exceptions are listed with their reason.
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

#: Layer -> module prefixes; the longest matching prefix decides.
LAYERS: dict[str, tuple[str, ...]] = {
    "base": ("partition_notify.errors", "partition_notify.limits", "partition_notify.backoff",
             "partition_notify.redact", "partition_notify.api_roles",
             "partition_notify.metrics"),
    "contract": ("partition_notify.contract",),
    "settings": ("partition_notify.settings",),
    "store": ("partition_notify.store",),
    "transports": ("partition_notify.transports",),
    "publisher": ("partition_notify.publisher",),
    "subscriber": ("partition_notify.subscriber",),
    "revisions": ("partition_notify.revisions",),
    "writers": ("partition_notify.writers",),
    "app": ("partition_notify.app",),
    "deadlines": ("partition_notify.deadlines",),
    "http": ("partition_notify.http",),
    "integrations": ("partition_notify.integrations",),
    "service": ("partition_notify.service", "partition_notify.service_housekeeping"),
    "cli": ("partition_notify.cli", "partition_notify.cli_", "partition_notify.demo"),
    # The package itself: the public names, re-exported lazily from every layer.
    "api": ("partition_notify",),
}
_CORE = {"base", "contract", "settings"}
#: Layer -> the layers it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "contract": {"base"},
    "settings": {"base", "contract"},
    "store": {"base", "contract"},
    "transports": _CORE | {"store"},
    "publisher": _CORE | {"store", "transports"},
    "subscriber": _CORE | {"store", "transports"},
    "revisions": _CORE | {"store"},
    "writers": _CORE | {"store", "publisher", "revisions"},
    "app": _CORE | {"store", "transports", "publisher", "subscriber", "revisions", "writers"},
    "deadlines": _CORE | {"store", "publisher", "subscriber", "app"},
    "http": _CORE | {"store", "publisher", "subscriber", "revisions", "writers", "app",
                     "deadlines"},
    "integrations": _CORE | {"store", "transports", "subscriber", "app"},
    "service": set(LAYERS) - {"cli", "api"},
    "cli": set(LAYERS),
    "api": set(LAYERS),
}
#: (importer, imported): why this edge against the layering is acceptable.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("partition_notify.deadlines.jobs", "partition_notify.service"):
        "type-only: the deadline job registers itself on the Service that runs it",
    ("partition_notify.app", "partition_notify.deadlines.api"):
        "the App.deadlines property builds the facade on first use",
}


def layer_of(module: str) -> str | None:
    best: tuple[int, str] | None = None
    for layer, prefixes in LAYERS.items():
        for prefix in prefixes:
            exact = module == prefix or module.startswith(prefix + ".")
            loose = prefix.endswith("_") and module.startswith(prefix)
            if (exact or loose) and (best is None or len(prefix) > best[0]):
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


def forbidden_edges() -> list[str]:
    bad = []
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            importer = _module_name(path)
            source = layer_of(importer)
            assert source is not None, f"{importer} is in no layer: add it to LAYERS"
            for imported, type_only in sorted(imports_of(path).items()):
                target = layer_of(imported)
                assert target is not None, f"{imported} is in no layer: add it to LAYERS"
                if target == source or target in ALLOWED[source]:
                    continue
                if type_only and target == "app":
                    continue
                if (importer, imported) not in EXCEPTIONS:
                    bad.append(f"{importer} ({source}) imports {imported} ({target})")
    return bad


def test_no_layer_imports_a_layer_above_it() -> None:
    assert forbidden_edges() == []


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
    assert layer_of("partition_notify.cli_http") == "cli"
    assert layer_of("partition_notify.contract.messages") == "contract"
    assert layer_of("partition_notify") == "api"


def test_every_exception_is_still_needed() -> None:
    for importer, imported in EXCEPTIONS:
        path = module_path(importer)
        path = path.with_suffix(".py") if path.with_suffix(".py").is_file() \
            else path / "__init__.py"
        assert imported in imports_of(path), f"stale exception: {importer} -> {imported}"


def test_the_architecture_page_names_every_layer() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## The layers", 1)[1].split("\n\n", 2)[1]
    for layer, prefixes in LAYERS.items():
        if layer == "api":
            continue  # the package itself: its own section
        shown = [p for p in prefixes if f"`{p.replace('.', '/')}" in table
                 or f"`{p.rsplit('.', 1)[-1]}" in table]
        assert shown, f"layer {layer} ({prefixes}) is not in docs/architecture.md's table"
