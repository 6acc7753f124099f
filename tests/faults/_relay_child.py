"""A relay process: run the relay job every 0.1 s until killed.

Used by the fault and service tests to have relays in processes of their own
(several against one store, or one to SIGKILL while it holds a lease).
argv: store_url transport_url owner lease_seconds publish_timeout [heartbeat_ms]
"""

from __future__ import annotations

import logging
import os
import sys
import time

from partition_notify.publisher.relay import Relay
from pydantic import SecretStr

from partition_notify.app import build_app


def main() -> None:
    store_url, transport_url, owner, lease, timeout = sys.argv[1:6]
    heartbeat = int(sys.argv[6]) if len(sys.argv) > 6 else 1000
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    app = build_app(
        store_url=store_url,
        transport_url=transport_url,
        broker_username=os.environ.get("PN_TEST_BROKER_USERNAME", "pn_service"),
        broker_password=SecretStr(os.environ.get("PN_TEST_BROKER_PASSWORD", "pn-service-secret")),
        publish_timeout_seconds=float(timeout),
        heartbeat_ms=heartbeat,
    )
    relay = Relay(app.store, app.transport, owner=owner, lease_seconds=float(lease),
                  publish_timeout=float(timeout), writer_grace_seconds=0.0)
    print("relay ready", flush=True)
    while True:
        relay.run_once()
        time.sleep(0.1)  # the job interval of serve


if __name__ == "__main__":
    main()
