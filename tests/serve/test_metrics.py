"""The metrics endpoint in-process: pn_* families, subscriber counters, /healthz states."""

from __future__ import annotations

import urllib.error
import urllib.request

from partition_notify.subscriber import SubscriberStats

from partition_notify.metrics import Metrics


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_endpoint_serves_relay_and_subscriber_metrics_and_health() -> None:
    m = Metrics()
    stats = SubscriberStats(received=7, malformed=2, gaps=1, missing_events=3, coalesced=4,
                            inbox_high_water=9)
    m.track_subscriber(stats, "scheduler")
    healthy = [True]
    m.healthy = lambda: healthy[0]
    port = m.serve(0)
    try:
        m.published.inc(5)
        status, text = get(port, "/metrics")
        assert status == 200
        assert "pn_relay_published_total 5.0" in text
        assert 'pn_subscriber_gaps_total{subscriber="scheduler"} 1.0' in text
        assert 'pn_subscriber_malformed_total{subscriber="scheduler"} 2.0' in text
        assert 'pn_subscriber_coalesced_total{subscriber="scheduler"} 4.0' in text
        assert 'pn_subscriber_inbox_high_water{subscriber="scheduler"} 9.0' in text
        for name in ("duplicates", "filled", "fill_errors"):
            assert f'pn_subscriber_{name}_total{{subscriber="scheduler"}} 0.0' in text, name
        stats.gaps += 1  # read live at scrape time
        assert 'pn_subscriber_gaps_total{subscriber="scheduler"} 2.0' in get(port, "/metrics")[1]
        for name in ("pn_relay_failed_batches_total", "pn_relay_consecutive_failures",
                     "pn_relay_lag_events", "pn_relay_lag_seconds", "pn_retention_purged_total",
                     "pn_store_up"):
            assert f"\n{name} " in text, name
        assert get(port, "/healthz") == (200, "ok\n")
        healthy[0] = False
        assert get(port, "/healthz") == (503, "unhealthy\n")
    finally:
        m.close()
