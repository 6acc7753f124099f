"""A writer process that dies (SIGKILL from the test) in the middle of a placement.

``python -m tests.revisions.placement_worker <store_url> <table> <revision> <write_id>
<partition>``: places write ``write_id`` (an overwrite of ``partition``) under the
table's placement lease, prints ``PLACING`` once the lease is held and its
retirement computed, then waits on stdin for ever: its renames never end.
"""

from __future__ import annotations

import sys


def main(url: str, table: str, revision: str, write_id: str, partition: str) -> None:
    from partition_notify.revisions.files import RevisionFiles

    from partition_notify.app import build_app

    app = build_app(store_url=url, transport_url="embedded://")
    files = RevisionFiles(app.revisions)
    with files.placing(table, int(revision), write_id, [partition]) as place:
        place.retire([partition], f"_pn_retired/{write_id}")
        print("PLACING", flush=True)
        sys.stdin.read()
    print("UNEXPECTED: released", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
