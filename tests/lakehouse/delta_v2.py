"""A Delta V2 checkpoint under a UUID name with a sidecar, made from the classic-named one
delta-rs writes.

delta-rs 1.6 cannot write one: with the ``v2Checkpoint`` table feature and
``delta.checkpointPolicy=v2`` its ``create_checkpoint`` writes
``<version>.checkpoint.parquet`` (a V2 checkpoint, with a ``checkpointMetadata`` row, under
the classic name). Spark and Databricks write UUID-named ones. So the files are crafted
exactly per the Delta protocol (PROTOCOL.md, "V2 Spec", "UUID-named checkpoint",
"Sidecar Files", "Last Checkpoint File Schema"): the top-level file
``_delta_log/<version>.checkpoint.<uuid>.json|parquet`` holds ``checkpointMetadata``,
``protocol``, ``metaData`` and one ``sidecar`` action; the ``add`` actions are in
``_delta_log/_sidecars/<uuid>.parquet``; ``_last_checkpoint`` names the file under
``v2Checkpoint``. delta-rs reads the result (the tests load it at the checkpoint's version).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any


def uuid_named_checkpoint(location: Path, version: int, top: str) -> Path:
    """Replace delta-rs's checkpoint of ``version`` by a UUID-named one whose top-level
    file is ``top`` ("json" or "parquet"); the new file's path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = location / "_delta_log"
    classic = log / f"{version:020d}.checkpoint.parquet"
    table = pq.read_table(classic)
    rows = table.to_pylist()
    (log / "_sidecars").mkdir(exist_ok=True)
    side = log / "_sidecars" / f"{uuid.uuid4()}.parquet"
    pq.write_table(pa.Table.from_pylist([r for r in rows if r["add"] is not None],
                                        schema=table.schema).select(["add", "remove"]), side)
    sidecar = {"path": side.name, "sizeInBytes": side.stat().st_size,
               "modificationTime": side.stat().st_mtime_ns // 1_000_000}
    top_rows = [r for r in rows if r["add"] is None and r["remove"] is None]
    path = log / f"{version:020d}.checkpoint.{uuid.uuid4()}.{top}"
    if top == "parquet":
        row = {**dict.fromkeys(table.schema.names), "sidecar": {**sidecar, "tags": None}}
        pq.write_table(pa.Table.from_pylist([*top_rows, row], schema=table.schema)
                       .drop_columns(["add", "remove"]), path)
    else:
        lines = [json.dumps({k: _json(k, v)}) for r in top_rows for k, v in r.items()
                 if v is not None]
        path.write_text("\n".join([*lines, json.dumps({"sidecar": sidecar})]) + "\n")
    classic.unlink()
    (log / "_last_checkpoint").write_text(json.dumps({
        "version": version, "size": len(rows), "v2Checkpoint": {
            "path": path.name, "sizeInBytes": path.stat().st_size,
            "modificationTime": path.stat().st_mtime_ns // 1_000_000}}))
    return path


def _json(kind: str, action: dict[str, Any]) -> dict[str, Any]:
    """An action as the JSON log spells it: parquet's maps (lists of pairs) as objects."""
    if kind != "metaData":
        return {k: v for k, v in action.items() if v is not None}
    fmt = action["format"]
    return {**{k: v for k, v in action.items() if v is not None},
            "configuration": dict(action["configuration"] or []),
            "format": {"provider": fmt["provider"], "options": dict(fmt["options"] or [])}}
