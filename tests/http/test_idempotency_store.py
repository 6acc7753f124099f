"""Idempotency keys expire: the store forgets them after the TTL and the purge deletes them."""

from __future__ import annotations

from partition_notify.store import Store
from partition_notify.store.idempotency import IdempotencyKeys, IdempotentReplay

from partition_notify.app import build_app


class Clock:
    t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_keys_expire_and_are_purged(store_url: str) -> None:
    clock = Clock()
    app = build_app(store_url=store_url, transport_url="embedded://")
    store = Store.open(store_url, clock=clock)
    try:
        http = IdempotencyKeys(store)
        app.publisher.register_table("db", "t", ["ds"])

        def write(key: str, body: dict[str, int]) -> None:
            store.log.append([], in_txn=lambda uow, _m: http.record_in(
                uow, principal="p", key=key, fingerprint="f", status=201, body=body,
                ttl_seconds=60))

        write("k", {"n": 1})
        assert http.stored_response("p", "k") is not None
        try:
            write("k", {"n": 2})
            raise AssertionError("a live key was stored twice")
        except IdempotentReplay as replay:
            assert replay.stored.body == {"n": 1}
        clock.t += 61
        assert http.stored_response("p", "k") is None
        write("k", {"n": 3})  # an expired key may be used again
        assert http.stored_response("p", "k").body == {"n": 3}  # type: ignore[union-attr]
        write("other", {"n": 4})
        clock.t += 61
        assert http.purge() == 2
        assert http.stored_response("p", "other") is None
    finally:
        store.close()
        app.close()
