"""The is-set-done look-up sees a set-done the moment another writer commits it.

The look-up keeps raw driver connections open between calls
(store/hot_read.py); a kept connection must never answer from an older
snapshot. Each test warms the reader's connection with a miss first, so the
connection that answers afterwards is the kept one, then a commit made through
another connection or process must be visible on the very next look-up: no
sleep, no retry.
"""

from __future__ import annotations

import multiprocessing

from partition_notify.app import build_app
from partition_notify.contract import spec
from store import Store
from tests.store._writer_process import mark_on_request


def covering(store: Store, wanted: str) -> list[str]:
    info = store.catalog.get_table("db", "t")
    return store.retention.set_done_covering(info, spec.covering_specs(spec.parse(wanted)))


def test_commit_through_another_store_is_seen_at_once(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as writer:
        writer.publisher.register_table("db", "t", ["ds", "region"], retention_seconds=3600)
        reader = Store.open(store_url)
        try:
            for day in range(20):
                wanted = f"ds={day}/region=eu"
                assert covering(reader, wanted) == []  # keeps its connection open
                done = f"ds={day}" if day % 2 else wanted
                writer.publisher.send_mark_set_done("db", "t", done)
                assert len(covering(reader, wanted)) == 1, f"commit of {done} not seen"
        finally:
            reader.close()


def test_commit_in_another_process_is_seen_at_once(store_url: str) -> None:
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table("db", "t", ["ds", "region"], retention_seconds=3600)
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=mark_on_request, args=(store_url, theirs))
        proc.start()
        try:
            assert ours.poll(60) and ours.recv() == "ready"
            for day in range(10):
                wanted = f"ds={day}/region=eu"
                assert covering(app.store, wanted) == []
                ours.send(wanted)
                assert ours.poll(30) and ours.recv() == wanted
                assert len(covering(app.store, wanted)) == 1, f"commit of {wanted} not seen"
        finally:
            ours.send(None)
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    assert proc.exitcode == 0
