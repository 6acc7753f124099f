"""A writer process for test_writer_killed: commit, then block in publish until killed.

Its broker is a black hole (accepts TCP, never answers), so the publish after
the commit cannot complete; the test SIGKILLs this process once the commit is
visible in the store.
"""

from __future__ import annotations

import sys

from pydantic import SecretStr

from partition_notify.app import build_app


def main(store_url: str, transport_url: str, db: str, worker: str, count: str) -> None:
    app = build_app(store_url=store_url, transport_url=transport_url,
                    broker_username="pn_service", broker_password=SecretStr("unused-here"),
                    connect_timeout_seconds=120, publish_timeout_seconds=120)
    app.publisher.announce_partitions(db, "events",
                                      [f"ds=w{worker}/n={n}" for n in range(int(count))])
    print("publish returned: the black hole answered?", file=sys.stderr)
    sys.exit(5)


if __name__ == "__main__":
    main(*sys.argv[1:])
