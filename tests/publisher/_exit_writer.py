"""A writer that publishes set-dones and ends without App.close() (a script that just ends).

Used by test_writer_exit.py. Arguments: store URL, transport URL, user, password, count.
"""

from __future__ import annotations

import sys

from pydantic import SecretStr

from partition_notify.app import build_app


def main(store_url: str, transport_url: str, user: str, password: str, count: str) -> None:
    # An hour between flushes: only the interpreter-exit flush can write the marks.
    app = build_app(store_url=store_url, transport_url=transport_url, broker_username=user,
                    broker_password=SecretStr(password), connect_timeout_seconds=5.0)
    app.publisher.marks.interval = 3600.0
    for n in range(int(count)):
        app.publisher.send_mark_set_done("exits", "events", f"ds={n}")
    print("published", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
