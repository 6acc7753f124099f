"""One pyiceberg commit, from the command line: what the scheduler tests (whose venv has
no pyiceberg) run with the core venv's Python.

``python -m tests.lakehouse.iceberg_commit CATALOG_URI WAREHOUSE_DIR DAY REGION [SET_DONE]``
creates ``sales.orders`` (tests.lakehouse.helpers.iceberg_table) when missing, appends one
row, with the set-done property when given, and prints the new snapshot id.
"""

from __future__ import annotations

import sys
from pathlib import Path

from partition_notify.writers.lakehouse.commits import SET_DONE_PROPERTY
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchTableError

from tests.lakehouse.helpers import iceberg_table, rows


def main(argv: list[str]) -> int:
    if len(argv) not in (4, 5):
        print("usage: iceberg_commit CATALOG_URI WAREHOUSE_DIR DAY REGION [SET_DONE]",
              file=sys.stderr)
        return 2
    uri, warehouse, day, region = argv[:4]
    catalog = load_catalog("lake", type="sql", uri=uri, warehouse=Path(warehouse).as_uri())
    try:
        table = catalog.load_table("sales.orders")
    except NoSuchTableError:
        table = iceberg_table(catalog)
    props = {SET_DONE_PROPERTY: argv[4]} if len(argv) == 5 else {}
    table.append(rows(table, (day, region, 1)), snapshot_properties=props)
    print(table.current_snapshot().snapshot_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
