"""The README's ``spark-defaults.conf`` block works when copied.

Read as Spark reads a properties file (java.util.Properties, values trimmed):
a ``#`` starts a comment only at the start of a line, so an inline comment
would become part of the serve URL and every HTTP delivery would fail.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from partition_notify.cli.spark import spark_settings
from tests.support.accounts import ROOT


def _block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Turn it on for a whole cluster", 1)[1]
    found = re.search(r"```[a-z]*\n(.*?)```", section, re.S)
    assert found, "no code block under 'Turn it on for a whole cluster'"
    return found[1]


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties for one-line entries, then Spark's ``trim`` of each value."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        key = re.match(r"[^\s=:]+", line)
        assert key, f"not a property line: {raw!r}"
        rest = line[key.end():].lstrip()
        if rest[:1] in ("=", ":"):
            rest = rest[1:]
        out[key[0]] = rest.strip()
    return out


def test_readme_spark_defaults_snippet_is_what_spark_conf_prints() -> None:
    props = parse_properties(_block())
    url = props.get("spark.partitionnotify.serveUrl", "")
    parts = urlsplit(url)
    assert parts.scheme in ("http", "https") and parts.hostname and not re.search(r"\s", url), \
        f"spark.partitionnotify.serveUrl would be {url!r}"
    assert props == spark_settings(url, None)


def test_inline_comment_is_part_of_the_value() -> None:
    """The parser reads a properties file as Spark does (what broke the old snippet)."""
    props = parse_properties("a.b   http://x:1   # note\n# whole-line comment\nc=d\n")
    assert props == {"a.b": "http://x:1   # note", "c": "d"}
