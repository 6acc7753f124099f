"""A long-running subscriber with reconnects: no duplicate, bounded memory (issue #10, 4).

The CI-sized variant of ``tests/soak/subscriber_soak.py`` (1,000,000 messages,
run by hand): 20,000 set-done messages reach the subscriber only through two
reconnects (they are logged while it is away, as if the broker dropped them),
with a de-dup window far smaller than the message count. Every message must
be delivered exactly once and resident memory must not grow with the count.
"""

from __future__ import annotations

import partition_notify.subscriber.subscription as subscription_module
import pytest

from tests.contract.faults import FaultProxy
from tests.faults.support import Collector, bulk_set_done, rss_mb, tally
from tests.transports.stomp_helpers import build, host_port, stomp_spec

pytestmark = [pytest.mark.broker]

PER_ROUND = 10_000
ROUNDS = 2
WINDOW = 1_000
#: Between the end of the first round (warm) and the end of the last: the
#: collector keeps every id (~1 MiB); the subscriber must keep nothing per message.
RSS_GROWTH_LIMIT_MB = 32.0


def test_many_messages_and_reconnects_no_duplicate_bounded_rss(store_url, monkeypatch):
    monkeypatch.setattr(subscription_module, "DEDUP_WINDOW", WINDOW)
    spec = stomp_spec("activemq")
    proxy = FaultProxy(*host_port(spec))
    publisher = build(spec, store_url)
    follower = build(spec, store_url, url=proxy.url(), heartbeat_ms=500)
    got = Collector()
    try:
        publisher.publisher.register_table("soak", "events", ["d"], retention_seconds=3600)
        with follower.subscriber() as sub:
            subscription = sub.subscribe("soak.events", got, history=True)
            first = publisher.publisher.send_mark_set_done("soak", "events", "d=first")
            assert got.wait_for({first.message_id}, 10)
            ids = [first.message_id]
            rss_before = 0.0
            for r in range(ROUNDS):
                if r == 1:
                    rss_before = rss_mb()
                ids += bulk_set_done(publisher, "soak", "events", r * PER_ROUND, PER_ROUND)
                proxy.cut()  # the follower reconnects at once and must catch up
                assert got.wait_for(set(ids), 120), \
                    f"round {r}: {len(set(ids) - got.seen.keys())} never delivered"
            last = publisher.publisher.send_mark_set_done("soak", "events", "d=last")
            ids.append(last.message_id)
            assert got.wait_for({last.message_id}, 10)
            growth = rss_mb() - rss_before
            extra = sum(n - 1 for n in got.seen.values())
            tally(f"subscriber {len(ids)} messages, {ROUNDS} reconnects, window {WINDOW}",
                  acknowledged=len(ids), delivered=got.delivered(set(ids)),
                  duplicates_suppressed=sub.stats.duplicates + subscription.duplicates,
                  duplicates_delivered=extra, filled_from_log=sub.stats.filled,
                  reconnects=sub.stats.reconnects, rss_growth_mb=f"{growth:.1f}")
            assert extra == 0, f"{extra} message(s) delivered twice"
            assert len(got.order) == len(ids)
            assert sub.stats.reconnects >= ROUNDS
            assert growth < RSS_GROWTH_LIMIT_MB
            # What de-dup keeps: a mark per topic, nothing per message.
            window = sub._seq._windows[publisher.store.catalog.get_table("soak", "events").topic]
            assert (window.high, window.above) == (len(ids), set())
            assert len(subscription._seen) <= WINDOW  # recent ids only
    finally:
        follower.close()
        publisher.close()
        proxy.close()
