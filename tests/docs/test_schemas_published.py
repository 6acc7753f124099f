"""The JSON Schemas in docs/ are the ones the models generate (no drift)."""

import json
from pathlib import Path

from partition_notify.contract import json_schemas

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def test_published_schemas_match_models():
    for name, schema in json_schemas().items():
        published = json.loads((DOCS / f"{name}.schema.json").read_text())
        assert published == json.loads(json.dumps(schema)), (
            f"docs/schemas/{name}.schema.json is stale: regenerate with "
            "`partition-notify schema --out docs/schemas`"
        )
