"""Settings refuse what would break later, naming the variable or keyword (session 18).

Before: ``PN_POLL_INTERVAL_SECONDS=inf`` was accepted and killed the embedded
consumer's thread (a ``wait`` then timed out on a set-done that was written);
``PN_CONNECT_TIMEOUT_SECONDS=inf`` ended every command in a traceback; a
misspelled ``build_app`` keyword was ignored (the app used ``./partition-notify.db``);
``build_app(settings, **overrides)`` took the overrides unvalidated; a ``.env``
that is not UTF-8 ended every command in a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from partition_notify import build_app
from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import MAX_SECONDS
from partition_notify.settings import load_settings
from tests.support.cli import clean_cli


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e300", str(MAX_SECONDS + 1)])
@pytest.mark.parametrize("var", ["PN_POLL_INTERVAL_SECONDS", "PN_CONNECT_TIMEOUT_SECONDS",
                                 "PN_PUBLISH_TIMEOUT_SECONDS", "PN_CLOSE_TIMEOUT_SECONDS"])
def test_a_duration_that_is_no_deadline_is_one_line_naming_the_variable(
        var: str, value: str, sqlite_url: str, tmp_path: Path) -> None:
    build_app(store_url=sqlite_url).close()
    done = clean_cli(["--store-url", sqlite_url, "tables"], tmp_path, **{var: value})
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1 and f"{var}={value!r}" in lines[0], done.stderr
    assert "finite" in done.stderr or "at most" in done.stderr, done.stderr


@pytest.mark.parametrize("value", [0.5, 3600, MAX_SECONDS])
def test_durations_in_range_are_kept(value: float) -> None:
    assert load_settings(poll_interval_seconds=value).poll_interval_seconds == value


def test_a_misspelled_keyword_is_refused_with_the_closest_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where the default store would have been created
    with pytest.raises(ConfigurationError, match=r"stor_url .*did you mean store_url"):
        build_app(stor_url=f"sqlite:///{tmp_path}/intended.db")
    assert list(tmp_path.iterdir()) == []


def test_overrides_beside_a_settings_object_are_validated(tmp_path: Path) -> None:
    settings = load_settings(store_url=f"sqlite:///{tmp_path}/s.db")
    with pytest.raises(ConfigurationError, match="connect_timeout_seconds=-1"):
        build_app(settings, connect_timeout_seconds=-1)
    with pytest.raises(ConfigurationError, match="poll_interval_seconds='fast'"):
        build_app(settings, poll_interval_seconds="fast")
    with pytest.raises(ConfigurationError, match="no_such_setting"):
        build_app(settings, no_such_setting=1)
    with build_app(settings, default_retention_seconds=60) as app:
        assert app.settings.default_retention_seconds == 60
        assert app.settings.store_url == settings.store_url


@pytest.mark.parametrize("content", [b"PN_TOPIC_PREFIX=x\n\xff\xfe\n", b"\xc3\x28=1\n"])
def test_an_unreadable_env_file_is_one_line_naming_it(content: bytes, sqlite_url: str,
                                                      tmp_path: Path) -> None:
    build_app(store_url=sqlite_url).close()
    (tmp_path / ".env").write_bytes(content)
    done = clean_cli(["--store-url", sqlite_url, "tables"], tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert ".env" in done.stderr, done.stderr
