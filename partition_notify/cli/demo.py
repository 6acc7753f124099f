"""The README's main job: a scheduler waits, a pipeline writes, a latecomer catches up.

Runs on the embedded defaults (SQLite store, the store's log as the bus), so
it needs no broker. With ``spark`` a local PySpark job writes the table and
the notifications come from its commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from partition_notify.app import App, build_app
from partition_notify.contract import AddPartitionMessage, AnyMessage, SetDoneMessage
from partition_notify.core.errors import ConfigurationError, SubscribeError

DB, TABLE = "sales", "orders"
DAY = "20110228"
REGIONS = ("us", "eu", "apac")


def _say(t0: float, who: str, text: str) -> None:
    # One write per line: two threads print, and print() sends the newline apart.
    sys.stdout.write(f"[{time.monotonic() - t0:7.3f}s] {who:<9} {text}\n")
    sys.stdout.flush()


#: Written into a workdir the demo made, so a re-run knows it may clean it.
MARKER = ".partition-notify-demo"
#: What a run creates in its workdir; a re-run removes exactly these, nothing else.
OWN_ENTRIES = ("store.db", "store.db-wal", "store.db-shm", "store.db-journal",
               "store.db-pn-commit", "warehouse")


def prepare_workdir(workdir: str) -> Path:
    """A workdir that is new, empty, or one the demo made; never anyone else's files.

    ``--workdir .`` or ``~`` used to be removed wholesale.
    """
    root = Path(workdir).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ConfigurationError(f"demo workdir {str(root)!r} exists and is not a directory")
    if root.is_dir():
        _require_access(root, os.R_OK | os.X_OK, "readable")
    if root.is_dir() and any(root.iterdir()) and not (root / MARKER).is_file():
        raise ConfigurationError(
            f"demo workdir {str(root)!r} is not empty and was not created by the demo; "
            "nothing was deleted: pass --workdir with a new or empty directory"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"demo workdir {str(root)!r} cannot be made ({exc.strerror}): pass --workdir "
            "with a directory this process may create") from None
    # Checked before anything is removed: a re-run must not stop half-way through.
    _require_access(root, os.W_OK | os.X_OK, "writable")
    try:
        for name in OWN_ENTRIES:
            entry = root / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.exists() or entry.is_symlink():
                entry.unlink()
        (root / MARKER).write_text("created by partition-notify demo; a re-run replaces "
                                   f"only {', '.join(OWN_ENTRIES)}\n")
    except OSError as exc:
        raise ConfigurationError(
            f"demo workdir {str(root)!r}: cannot replace {exc.filename} ({exc.strerror}): "
            "pass --workdir with a new or empty directory") from None
    return root


def _require_access(root: Path, mode: int, what: str) -> None:
    if not os.access(root, mode, effective_ids=os.access in os.supports_effective_ids):
        raise ConfigurationError(
            f"demo workdir {str(root)!r} is not {what} by this process (uid {os.geteuid()}); "
            "nothing was deleted: pass --workdir with a directory it may read and write")


def run_demo(workdir: str = "demo-run", spark: bool = True) -> int:
    root = prepare_workdir(workdir)
    store_url = f"sqlite:///{root / 'store.db'}"
    location = str(root / "warehouse" / "sales.db" / "orders")
    t0 = time.monotonic()
    print(f"partition-notify demo — store {store_url}, transport embedded://\n")
    with build_app(store_url=store_url, transport_url="embedded://") as app:
        app.publisher.register_table(
            DB,
            TABLE,
            ["datestamp", "region"],
            retention_seconds=86400,
            location=location,
        )
        _say(t0, "setup", f"registered {DB}.{TABLE} (datestamp, region) on topic hcat.{DB}.{TABLE}")
        arrivals = _live_while_publishing(app, location, t0, spark)
        if arrivals is None:
            print("demo failed: the live scheduler never saw the set-done", file=sys.stderr)
            return 1
    late = _late_subscriber(store_url, t0)
    adds = sum(isinstance(m, AddPartitionMessage) for m in arrivals)
    dones = sum(isinstance(m, SetDoneMessage) for m in arrivals)
    print(
        f"\nsummary: live subscriber saw {adds} add-partition and {dones} set-done "
        f"message(s); late subscriber {'got' if late else 'did NOT get'} the set-done "
        "from history"
    )
    return 0 if late else 1


def _live_while_publishing(
    app: App, location: str, t0: float, spark: bool
) -> list[AnyMessage] | None:
    """A scheduler thread waits for the day's set-done and a subscription prints each
    message, while the pipeline publishes. Every message seen, or None when the
    scheduler never got its set-done."""
    with app.subscriber() as sub:
        got: list[SetDoneMessage] = []
        arrivals: list[AnyMessage] = []

        def scheduler() -> None:
            try:
                msg = sub.wait_for_set_done(DB, TABLE, f"datestamp={DAY}", timeout=600)
            except SubscribeError:  # the pipeline failed and closed it; its error is reported
                return
            got.append(msg)
            _say(
                t0,
                "live",
                f"set-done {msg.spec} received (event {msg.event_id}) — "
                "the day's job can start",
            )

        def on_message(msg: AnyMessage) -> None:
            arrivals.append(msg)
            if isinstance(msg, AddPartitionMessage):
                _say(t0, "live", f"add-partition {msg.partitions[0]} (event {msg.event_id})")

        sub.subscribe((DB, TABLE), on_message, history=False)
        waiter = threading.Thread(target=scheduler)
        waiter.start()
        _say(t0, "live", f"scheduler subscribed, waiting for datestamp={DAY}")
        if spark:
            _write_with_spark(app, location, t0)
        else:
            _publish_directly(app, t0)
        waiter.join(600)
        return arrivals if got else None


def _write_with_spark(app: App, location: str, t0: float) -> None:
    from partition_notify.writers.demo_job import write_demo_partitions

    _say(t0, "pipeline", "starting local Spark (the JVM takes a few seconds)...")
    write_demo_partitions(
        app, DB, TABLE, DAY, REGIONS, location, progress=lambda text: _say(t0, "pipeline", text)
    )


def _publish_directly(app: App, t0: float) -> None:
    pub = app.publisher
    for region in REGIONS:
        pub.announce_partitions(DB, TABLE, [{"datestamp": DAY, "region": region}])
        _say(t0, "pipeline", f"announced datestamp={DAY}/region={region}")
    pub.send_mark_set_done(DB, TABLE, {"datestamp": DAY, "region": "us"})
    _say(t0, "pipeline", f"marked datestamp={DAY}/region=us done")
    pub.send_mark_set_done(DB, TABLE, {"datestamp": DAY})
    _say(t0, "pipeline", f"marked datestamp={DAY} done")


def _late_subscriber(store_url: str, t0: float) -> bool:
    """A scheduler started after everything was published, in a process of its own."""
    _say(t0, "late", f"a new scheduler process arrives: wait datestamp={DAY}/region=eu")
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "partition_notify.cli",
            "--store-url",
            store_url,
            "--transport-url",
            "embedded://",
            "wait",
            f"{DB}.{TABLE}",
            f"datestamp={DAY}/region=eu",
            "--timeout",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        _say(t0, "late", f"failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return False
    _say(
        t0,
        "late",
        f"got from history in {time.monotonic() - started:.2f} s (process start included):",
    )
    print("          " + proc.stdout.strip())
    return True
