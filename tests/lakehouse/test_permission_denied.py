"""A followed Delta table the user may not read, with a REAL permission-denied
(the product runs as ``nobody``: tests/support/unprivileged.py).

``register --format delta`` names the location and the OS's refusal in one line
and stores nothing; ``serve --once`` logs the table and the refused path, exits 0,
and loses nothing: once the table is readable the commit it could not read is
announced.
"""

from __future__ import annotations

from pathlib import Path

from deltalake import write_deltalake

from partition_notify.app import build_app
from tests.lakehouse.helpers import delta_rows, logged
from tests.support import unprivileged

KEYS = ["datestamp", "region"]


def _register(d: Path, location: Path) -> tuple[int, str]:
    done = unprivileged.cli("--store-url", f"sqlite:///{d}/s.db", "register", "sales.orders",
                            "--keys", ",".join(KEYS), "--format", "delta", "--location",
                            str(location), cwd=d)
    return done.returncode, done.stderr


def test_an_unreadable_delta_table_is_named_and_nothing_is_lost() -> None:
    unprivileged.require_unprivileged()
    with unprivileged.shared_dir() as d:
        unprivileged.writable_by_user(d)
        location = d / "orders"
        write_deltalake(str(location), delta_rows(("20260101", "us", 1)), partition_by=KEYS)
        location.chmod(0o700)
        code, err = _register(d, location)
        assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"delta table {location} cannot be read" in err and "Permission denied" in err
        location.chmod(0o755)
        assert _register(d, location) == (0, "")
        write_deltalake(str(location), delta_rows(("20260102", "us", 1)), partition_by=KEYS,
                        mode="append")
        (location / "_delta_log").chmod(0o700)
        once = unprivileged.cli("--store-url", f"sqlite:///{d}/s.db", "serve", "--once", cwd=d)
        assert once.returncode == 0, once.stderr[-2000:]
        assert "delta follower: sales.orders: the table cannot be loaded (PermissionError" \
            in once.stderr, once.stderr
        assert f"{location}/_delta_log" in once.stderr and "Traceback" not in once.stderr
        (location / "_delta_log").chmod(0o755)
        with build_app(store_url=f"sqlite:///{d}/s.db", transport_url="embedded://") as app:
            assert logged(app, "sales.orders") == []
        again = unprivileged.cli("--store-url", f"sqlite:///{d}/s.db", "serve", "--once", cwd=d)
        assert again.returncode == 0, again.stderr[-2000:]
        with build_app(store_url=f"sqlite:///{d}/s.db", transport_url="embedded://") as app:
            assert [m.spec for m in logged(app, "sales.orders")] == [
                "datestamp=20260102/region=us"]
