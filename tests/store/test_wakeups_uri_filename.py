"""The cross-process wake-ups of a store named by a URI filename
(``sqlite:///file:PATH?mode=ro&uri=true``) watch that store's file.

Before: they watched ``file:PATH`` as a relative path, which never exists:
``wait``/``tail`` on a read-only store URL logged "sqlite-inotify wake-ups failed
... unable to open database file" every few seconds and heard commits only by polling.
"""

from __future__ import annotations

import threading
from pathlib import Path

from partition_notify.store import Store
from partition_notify.store.wakeups import WAKE_SUFFIX, cross_process_waker, wake_file


def test_a_uri_filename_store_is_woken_by_a_commit(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    writer = Store.open(f"sqlite:///{db}")
    reader = Store.open(f"sqlite:///file:{db}?mode=ro&uri=true")
    woken = threading.Event()
    waker = cross_process_waker(reader.engine, woken.set)
    try:
        assert waker is not None
        woke_file = wake_file(reader.engine)
        assert woke_file is not None and woke_file.path == tmp_path / f"store.db{WAKE_SUFFIX}"
        assert woken.wait(10)  # the first wake-up: "whatever committed while nobody watched"
        woken.clear()
        with writer.engine.begin() as conn:  # a commit of another connection
            conn.exec_driver_sql("CREATE TABLE pn_test_commit (a INTEGER)")
        assert woken.wait(10), "no wake-up for a commit"
    finally:
        if waker is not None:
            waker.close(5)
        reader.close()
        writer.close()
