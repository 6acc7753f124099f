"""By hand: a subscriber follows 1,000,000 messages across reconnects (issue #10, item 4).

    cd <repo> && eval "$(bash scripts/services.sh env)" && \\
        PYTHONPATH=$PWD python -m tests.soak.subscriber_soak [--messages 1000000] \\
        [--reconnects 5] [--window 1000] [--store-url URL]

Real ActiveMQ behind a TCP proxy. Each round logs ``messages / reconnects``
set-done events straight into the store (as if the broker dropped them while
the subscriber was away: they can only come back from the event log), cuts
the subscriber's connection, and publishes ``--live`` more set-done messages
through the broker while the subscriber reconnects and catches up, so live
messages and log reads interleave. The de-dup window is set far below the
message count. Prints the tally line: delivered, duplicates, lost, resident
memory before and after. The suite runs a 20,000-message variant
(tests/transports/test_subscriber_long_run.py).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

import partition_notify.subscriber.subscription as subscription_module

from partition_notify.contract import AnyMessage
from tests.contract.faults import FaultProxy
from tests.faults.support import bulk_set_done, rss_mb, tally
from tests.support.accounts import bus_specs
from tests.transports.stomp_helpers import build, host_port


class Counter:
    """Counts deliveries per message number in a bytearray: 1 byte a message."""

    def __init__(self, capacity: int) -> None:
        self.hits = bytearray(capacity)
        self.delivered = 0
        self.duplicates = 0
        self.cond = threading.Condition()

    def __call__(self, msg: AnyMessage) -> None:
        n = int(msg.spec.split("=", 1)[1])
        with self.cond:
            if self.hits[n]:
                self.duplicates += 1
            else:
                self.hits[n] = 1
                self.delivered += 1
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.delivered >= count, timeout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--reconnects", type=int, default=5)
    ap.add_argument("--live", type=int, default=200, help="live publishes per round")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--store-url")
    args = ap.parse_args()
    subscription_module.DEDUP_WINDOW = args.window
    url = args.store_url or f"sqlite:///{tempfile.mkdtemp(prefix='pn-soak-')}/store.db"
    spec = bus_specs()["activemq"]
    proxy = FaultProxy(*host_port(spec))
    pub = build(spec, url)
    follower = build(spec, url, url=proxy.url(), heartbeat_ms=1000)
    per_round = args.messages // args.reconnects
    total = per_round * args.reconnects + args.live * args.reconnects
    got = Counter(total + 1)
    started = time.monotonic()
    try:
        pub.publisher.register_table("soak", "events", ["d"], retention_seconds=7 * 86400)
        with follower.subscriber() as sub:
            subscription = sub.subscribe("soak.events", got, history=True)
            rss_before = rss_mb()
            logged = live_next = 0
            live_base = per_round * args.reconnects
            for r in range(args.reconnects):
                t0 = time.monotonic()
                for lo in range(logged, logged + per_round, 10_000):  # ids not kept
                    bulk_set_done(pub, "soak", "events", lo, min(10_000, logged + per_round - lo),
                                  batch=10_000)
                logged += per_round
                t1 = time.monotonic()
                proxy.cut()
                for _ in range(args.live):
                    pub.publisher.send_mark_set_done("soak", "events", f"d={live_base + live_next}")
                    live_next += 1
                expected = logged + live_next
                if not got.wait_for(expected, 600):
                    print(f"round {r}: only {got.delivered} of {expected} delivered")
                    break
                print(f"round {r + 1}/{args.reconnects}: logged {per_round} in "
                      f"{t1 - t0:.1f} s, caught up in {time.monotonic() - t1:.1f} s, "
                      f"rss {rss_mb():.1f} MiB", flush=True)
            rss_after = rss_mb()
            window = sub._seq._windows[pub.store.catalog.get_table("soak", "events").topic]
            tally(f"subscriber {total} messages with {args.reconnects} reconnects, window "
                  f"{args.window}", acknowledged=total, delivered=got.delivered,
                  duplicates_suppressed=sub.stats.duplicates + subscription.duplicates,
                  duplicates_delivered=got.duplicates, reconnects=sub.stats.reconnects,
                  filled_from_log=sub.stats.filled, gaps=sub.stats.gaps,
                  window_above=len(window.above), rss_before_mb=f"{rss_before:.1f}",
                  rss_after_mb=f"{rss_after:.1f}",
                  seconds=f"{time.monotonic() - started:.0f}")
    finally:
        follower.close()
        pub.close()
        proxy.close()


if __name__ == "__main__":
    main()
