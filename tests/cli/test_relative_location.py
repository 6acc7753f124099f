"""A table's location is absolute or a URI: a relative one would be resolved
against each process's own working directory (the writers refuse it too)."""

from __future__ import annotations

import pytest

from partition_notify import build_app
from partition_notify.cli import main
from partition_notify.core.errors import ValidationError

RELATIVE = ["warehouse/orders", "./orders", "../orders", "orders"]
ACCEPTED = [
    "/data/orders",
    "file:/data/orders",
    "file:///data/orders",
    "s3://bucket/orders",
    "s3a://bucket/orders",
    "hdfs://nn:8020/orders",
]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("where", RELATIVE)
def test_cli_register_and_alter_refuse_a_relative_location(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, where: str
) -> None:
    cli = ("--store-url", sqlite_url)
    code, err = _run(capsys, *cli, "register", "loc.rel", "--keys", "ds", "--location", where)
    assert code == 1 and len(err) == 1, (code, err)
    assert "location of loc.rel" in err[0] and repr(where) in err[0], err
    assert "absolute path or a URI" in err[0], err
    assert _run(capsys, *cli, "register", "loc.rel", "--keys", "ds")[0] == 0
    code, err = _run(capsys, *cli, "alter", "loc.rel", "--location", where)
    assert code == 1 and len(err) == 1 and repr(where) in err[0], (code, err)
    with build_app(store_url=sqlite_url) as app:
        assert app.publisher.table("loc", "rel").location is None


@pytest.mark.parametrize("where", ACCEPTED)
def test_python_api_accepts_absolute_paths_and_uris(sqlite_url: str, where: str) -> None:
    with build_app(store_url=sqlite_url) as app:
        assert app.publisher.register_table("loc", "ok", ["ds"], location=where).location == where
        assert app.publisher.alter_table("loc", "ok", location="").location in ("", None)
        assert app.publisher.alter_table("loc", "ok", location=where).location == where


@pytest.mark.parametrize("where", RELATIVE)
def test_python_api_refuses_a_relative_location(sqlite_url: str, where: str) -> None:
    with build_app(store_url=sqlite_url) as app:
        with pytest.raises(ValidationError, match="absolute path or a URI"):
            app.publisher.register_table("loc", "rel", ["ds"], location=where)
        assert app.store.catalog.tables() == []
        app.publisher.register_table("loc", "rel", ["ds"])
        with pytest.raises(ValidationError, match="absolute path or a URI"):
            app.publisher.alter_table("loc", "rel", location=where)


def test_a_followed_delta_table_refuses_a_relative_location(
    capsys: pytest.CaptureFixture[str], sqlite_url: str
) -> None:
    # Refused before the follower reads the table's log from the working directory.
    code, err = _run(
        capsys,
        "--store-url",
        sqlite_url,
        "register",
        "loc.delta",
        "--keys",
        "ds",
        "--format",
        "delta",
        "--location",
        "tables/orders",
    )
    assert code == 1 and len(err) == 1, (code, err)
    assert "'tables/orders'" in err[0] and "absolute path or a URI" in err[0], err
    with build_app(store_url=sqlite_url) as app:
        assert app.store.catalog.tables() == []


@pytest.mark.parametrize("where", ["/data/orders\n", "/data/orders\r", "s3a://b/\torders",
                                   "/data/\x1b[2Jorders"])
def test_a_location_with_a_control_character_is_refused(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, where: str
) -> None:
    """A line break pasted along (``"/data/orders\\n"`` from a script's JSON, a CRLF file)
    was stored: no Spark commit's output path ever matched it, so every commit of the
    table was ignored ("no registered table matches its location"), and it went as
    is into log lines."""
    cli = ("--store-url", sqlite_url)
    code, err = _run(capsys, *cli, "register", "loc.ctl", "--keys", "ds", "--location", where)
    assert code == 1 and len(err) == 1, (code, err)
    assert "location of loc.ctl" in err[0] and "control character" in err[0], err
    with build_app(store_url=sqlite_url) as app:
        assert app.store.catalog.tables() == []
        app.publisher.register_table("loc", "ctl", ["ds"])
        with pytest.raises(ValidationError, match="control character"):
            app.publisher.alter_table("loc", "ctl", location=where)
        assert app.publisher.table("loc", "ctl").location is None
