"""The README's settings table is generated from ``Settings`` (issue 24):
every setting, its default, which processes read it and its description."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from partition_notify.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("settings_table",
                                                  ROOT / "scripts" / "settings_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_settings_table_is_up_to_date() -> None:
    done = subprocess.run([sys.executable, "scripts/settings_table.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_every_setting_has_a_row_with_readers_and_a_description() -> None:
    table = _script().render()
    rows = {line.split("|")[1].strip(" `"): line.split("|")[3:5]
            for line in table.splitlines() if line.startswith("| `PN_")}
    assert sorted(rows) == sorted(f"PN_{name.upper()}" for name in Settings.model_fields)
    for variable, (readers, description) in rows.items():
        assert readers.strip() and description.strip(), variable
    assert rows["PN_STORE_URL"][0].strip() == (
        "serve, writer, subscriber, Spark driver, Airflow triggerer")
    assert rows["PN_RELAY_MAX_ATTEMPTS"][0].strip() == "serve"


def test_check_fails_on_a_stale_table() -> None:
    script = _script()
    stale = (ROOT / "README.md").read_text().replace("| `PN_TOPIC_PREFIX` |", "| `PN_OLD` |")
    assert script.rewrite(stale) != stale
    assert script.rewrite(script.rewrite(stale)) == script.rewrite(stale)
