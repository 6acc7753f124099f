"""Entry point of the writer processes in test_event_ids (importable under 'spawn')."""

from __future__ import annotations

from typing import Any


def write(store_url: str, worker: int, count: int, barrier: Any) -> None:
    from partition_notify.app import build_app

    with build_app(store_url=store_url, transport_url="embedded://") as app:
        barrier.wait(60)
        for i in range(count):
            table = ("t0", "t1")[i % 2]
            if i % 10 == 0:
                app.publisher.announce_partitions(
                    "ids", table, [f"ds=p{worker}_{i}/n={n}" for n in range(3)])
            else:
                app.publisher.send_mark_set_done("ids", table, f"ds=p{worker}_{i}")


def mark_on_request(store_url: str, conn: Any) -> None:
    """Mark ``db.t`` set-done for each spec received on ``conn``; reply once committed."""
    from partition_notify.app import build_app

    with build_app(store_url=store_url, transport_url="embedded://") as app:
        conn.send("ready")
        while (wanted := conn.recv()) is not None:
            app.publisher.send_mark_set_done("db", "t", wanted)
            conn.send(wanted)  # send_mark_set_done has returned: the row is committed
