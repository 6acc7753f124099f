"""docs/http-api.md's settings table states the code's defaults."""

import re
from pathlib import Path

from partition_notify.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "http-api.md"


def test_http_settings_table_matches_defaults() -> None:
    rows = dict(re.findall(r"^\| `PN_([A-Z_]+)` \| `([^`]+)` \|", DOC.read_text(), re.M))
    fields = Settings.model_fields
    checked = 0
    for env, shown in rows.items():
        default = fields[env.lower()].default
        expected = str(default).lower() if isinstance(default, bool) else str(default)
        assert shown == expected, f"PN_{env}: docs say {shown}, code says {expected}"
        checked += 1
    assert checked >= 7
