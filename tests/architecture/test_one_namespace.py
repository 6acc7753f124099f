"""One installed name: every layer folder imports as ``partition_notify.<layer>`` only.

The folders ``store/``, ``publisher/``, … sit at the top of the repository but
install as ``partition_notify.store``, … (pyproject's package-dir). A bare
``import store`` would work from the repository root and load the same file a
second time under another name, so it must appear nowhere.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
MAPPED: dict[str, str] = CONFIG["package-dir"]
BARE = {folder for folder in MAPPED.values()}
SOURCES = ("partition_notify", *sorted(BARE), "tests", "bench", "scripts")


def _bare_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                  if name.split(".")[0] in BARE]
    return found


def test_no_module_imports_a_layer_by_its_bare_folder_name() -> None:
    bad = [hit for top in SOURCES for path in sorted((ROOT / top).rglob("*.py"))
           for hit in _bare_imports(path)]
    assert bad == []


def test_the_check_sees_a_bare_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import store.schema\nfrom partition_notify.store import uow\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert _bare_imports(probe) == ["probe.py:1 store.schema"]
    finally:
        ROOT = saved


def test_every_package_folder_is_installed() -> None:
    folders = {"partition_notify": "partition_notify", **{v: k for k, v in MAPPED.items()}}
    wanted = set()
    for folder, package in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            wanted.add(".".join((package, *rel)))
    assert sorted(CONFIG["packages"]) == sorted(wanted)


_LOAD_ALL = """
import importlib, json, sys
skip = ("partition_notify.integrations.airflow", "partition_notify.integrations.dagster",
        "partition_notify.store.migrations")
root, names = sys.argv[1], [n for n in sys.argv[2:] if not n.startswith(skip)]
for name in names:
    importlib.import_module(name)
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if path and path.startswith(root):
        files.setdefault(path, []).append(name)
print(json.dumps({p: n for p, n in files.items() if len(n) > 1}))
"""


def _product_modules() -> list[str]:
    folders = {"partition_notify": "partition_notify", **{v: k for k, v in MAPPED.items()}}
    names = []
    for folder, package in folders.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            if "migrations" in rel:
                continue
            parts = (package, *rel[:-1]) if rel[-1] == "__init__" else (package, *rel)
            names.append(".".join(parts))
    return names


def _loaded_twice(modules: list[str]) -> dict[str, list[str]]:
    # From the repository root, where a bare ``store`` would also be importable.
    out = subprocess.run([sys.executable, "-c", _LOAD_ALL, str(ROOT), *modules],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    found: dict[str, list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


def test_no_module_loads_under_two_names() -> None:
    assert _loaded_twice(_product_modules()) == {}


def test_the_check_sees_a_module_loaded_twice() -> None:
    twice = _loaded_twice(["partition_notify.store.records", "store.records"])
    assert ["partition_notify.store.records", "store.records"] in twice.values()
