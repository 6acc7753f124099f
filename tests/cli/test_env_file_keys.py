"""A misspelled ``PN_*`` key in ``.env`` is warned about, naming the file, the line,
the key and the closest setting; the settings still load (a newer release's
``.env`` must work in an older one). Real CLI process in a directory with a ``.env``.

Before: ``.env`` keys nothing reads were silently ignored (the environment's were
already warned about: tests/cli/test_unknown_settings.py), so
``PN_STORE_URLL=...`` left the store at its default without a word.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from partition_notify import build_app
from tests.support.cli import clean_cli

ENV = """\
# settings of this deployment
PN_STORE_URLL=sqlite:///elsewhere.db
OTHER_TOOL_SETTING=1
export PN_POL_INTERVAL_SECONDS=1
pn_topic_prefix=hcat
PN_WRITER_TOKEN=t
PN_ICEBERG_CATALOG__LAKE__URI=http://x
PN_SOME_NEWER_SETTING="a value"
"""


def _tables(store_url: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    build_app(store_url=store_url).close()  # the store exists: `tables` only reads
    return clean_cli(["--store-url", store_url, "tables"], cwd, **env)


def test_misspelled_env_file_keys_are_one_line_each(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(ENV)
    done = _tables(sqlite_url, tmp_path)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "not a partition-notify" in line]
    env = tmp_path / ".env"
    assert warned == [
        f"{env}:2: PN_STORE_URLL is not a partition-notify setting and is ignored; "
        "did you mean PN_STORE_URL?",
        f"{env}:4: PN_POL_INTERVAL_SECONDS is not a partition-notify setting and is "
        "ignored; did you mean PN_POLL_INTERVAL_SECONDS?",
        f"{env}:8: PN_SOME_NEWER_SETTING is not a partition-notify setting and is "
        "ignored; see the README's settings table",
    ], done.stderr


def test_the_known_keys_of_an_env_file_still_apply(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PN_SOME_NEWER_SETTING=1\nPN_TOPIC_PREFIX=\n")
    done = _tables(sqlite_url, tmp_path)
    assert done.returncode == 1, done.stderr  # the bad prefix is read, not skipped
    assert "PN_TOPIC_PREFIX=''" in done.stderr, done.stderr
    assert f"{tmp_path / '.env'}:1: PN_SOME_NEWER_SETTING" in done.stderr, done.stderr


def test_an_env_file_of_known_keys_is_quiet(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PN_TOPIC_POLICY=per-table\nPN_WRITER_TOKEN=t\nHOME=/x\n")
    done = _tables(sqlite_url, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "not a partition-notify setting" not in done.stderr, done.stderr


def test_a_setting_line_the_env_file_parser_cannot_read_is_refused(
        sqlite_url: str, tmp_path: Path) -> None:
    """``PN_STORE_URL="sqlite:///...`` (its closing quote missing) was skipped by
    python-dotenv with a warning of its own, and the store fell back to the default
    ``./partition-notify.db``: ``serve`` would have created and served an empty store
    beside the real one. A line of a setting we read is refused, naming file and line;
    other tools' lines stay theirs."""
    build_app(store_url=sqlite_url).close()
    env = tmp_path / ".env"
    for text, line, name in [
        (f'OTHER="x" junk\nPN_STORE_URL="{sqlite_url}\nPN_TOPIC_POLICY=per-table\n', 2,
         "PN_STORE_URL"),
        ("# comment\n\nexport pn_topic_policy='single\n", 3, "PN_TOPIC_POLICY"),
    ]:
        env.write_text(text)
        done = clean_cli(["tables"], tmp_path)
        assert done.returncode == 1, done.stderr
        mine = [x for x in done.stderr.splitlines() if x.startswith("partition-notify")]
        assert mine == [f"partition-notify tables: error: {env}:{line}: {name} cannot be read: "
                        "expected KEY=VALUE, a quoted value closed on its line with nothing "
                        "after the closing quote but a # comment"], done.stderr
        assert not (tmp_path / "partition-notify.db").exists()
    env.write_text(f'OTHER_TOOL="x" junk\nPN_STORE_URL={sqlite_url}\n')
    done = clean_cli(["tables"], tmp_path)
    assert done.returncode == 0, done.stderr
