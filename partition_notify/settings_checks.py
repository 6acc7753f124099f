"""Checks of settings, for :mod:`partition_notify.settings`: text values, and
``PN_*`` names nothing reads (in the environment or the ``.env`` file).

A module of their own so that settings.py stays its list of fields. Each value
check raises ``ValueError`` with what is expected; settings.py names the
variable and the value (truncated, a secret's never) around it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, SecretStr

from partition_notify.contract.topics import validate_prefix
from partition_notify.core.errors import ConfigurationError
from partition_notify.core.limits import CONTROL_CHARS, MAX_SECONDS


def printable(value: object) -> object:
    """``value``, if it is no text or text without control characters."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if isinstance(text, str) and (found := CONTROL_CHARS.search(text)):
        raise ValueError(
            f"contains the control character {found.group()!r} at position {found.start()}; "
            "expected printable text (no line break, tab, NUL or escape)")
    return value


def duration(name: str, value: object) -> object:
    """Integer periods (retentions) have their own bounds; float durations are
    deadlines and intervals that time.monotonic() and the OS's timers must hold."""
    if name.endswith("_seconds") and isinstance(value, float) and value > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS} seconds (ten years)")
    return value


def streams_leave_room(value: int | None, connections: int | None) -> int | None:
    """PN_HTTP_MAX_STREAMS below PN_HTTP_MAX_CONNECTIONS."""
    if value is not None and connections is not None and value >= connections:
        raise ValueError(f"must be less than PN_HTTP_MAX_CONNECTIONS ({connections}), so "
                         "streams and long-polls cannot take every connection")
    return value


def topic_prefix(value: str) -> str:
    """``PN_TOPIC_PREFIX``: the rule topic naming applies (contract/topics.py)."""
    return validate_prefix(value)  # its InvalidNameError is a ValueError


def filesystem(value: object) -> object:
    """``PN_DEFAULT_FS``: a filesystem URI (``hdfs://nn:8020``, ``file:///``), no path."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:(//[^/?#]*)?/?",
                                                      value.strip()):
        raise ValueError("expected a filesystem URI without a path, e.g. hdfs://namenode:8020")
    return value.strip()



def split_bind(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8080`` for IPv6); port 0 picks a free one."""
    host, sep, port = value.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("expected host:port, e.g. 127.0.0.1:8080 (port 0 to 65535)")
    return host, int(port)


def http_bind(value: object) -> object:
    """``PN_HTTP_BIND``: checked when the settings load, as every setting is, not only when
    ``serve`` starts its HTTP server (``serve --once`` starts none); empty is off."""
    if value == "":
        return None
    if isinstance(value, str):
        split_bind(value)
    return value


def spool_dirs(value: object) -> object:
    """``PN_SPARK_SPOOL_DIRS``: absolute directories (``/x`` or ``file:/x``). A relative one
    would depend on serve's working directory (the Spark jar refuses a relative spoolDir
    too), and the pick-up reads local absolute paths only: it was dropped unsaid, as was
    one on another filesystem (``hdfs://``, ``s3://``). Whether each exists and is a
    directory is serve's startup check (writers/commit_locations.py), not this one."""
    if isinstance(value, str):
        for entry in (e.strip() for e in value.split(",")):
            if entry and not entry.startswith("/") and ":" not in entry:
                raise ValueError(f"{entry!r} is a relative directory; expected absolute "
                                 "directories, comma-separated (/srv/spool or file:/srv/spool)")
            if entry and ":" in entry and not entry.lower().startswith("file:"):
                raise ValueError(f"{entry!r} is not on the local filesystem (the pick-up reads "
                                 "local directories only); expected /srv/spool or file:/srv/spool")
    return value


DefaultFs = Annotated[str | None, BeforeValidator(filesystem)]
HttpBind = Annotated[str | None, BeforeValidator(http_bind)]
SpoolDirs = Annotated[str, BeforeValidator(spool_dirs)]

#: ``PN_*`` variables read by other parts than ``Settings``: the Spark driver's
#: token, and this repository's scripts and tests (scripts/services.sh).
OTHER_VARIABLES = frozenset({"PN_WRITER_TOKEN", "PN_SERVE_URL", "PN_PYTHON", "PN_TALLY_FILE"})
#: The Airflow push sink's settings (integrations/airflow/push_settings.py, which
#: this layer may not import; tests/cli/test_unknown_settings.py keeps them equal).
AIRFLOW_PUSH_VARIABLES = frozenset({
    "PN_AIRFLOW_URL", "PN_AIRFLOW_USERNAME", "PN_AIRFLOW_PASSWORD", "PN_AIRFLOW_ASSETS",
    "PN_AIRFLOW_TIMEOUT_SECONDS", "PN_AIRFLOW_INTERVAL_SECONDS", "PN_AIRFLOW_BATCH_SIZE",
    "PN_AIRFLOW_SETTLE_TIMEOUT_SECONDS"})
#: Families of ``PN_*`` variables with their own reader: Iceberg catalog
#: properties and the development tooling's.
OTHER_PREFIXES = ("PN_ICEBERG_CATALOG__", "PN_TEST_", "PN_TANSU_",
                  "PN_SERVICES_", "PN_BENCH_", "PN_FUZZ_", "PN_H3_", "PN_BUILD_",
                  "PN_ACTIVEMQ_", "PN_KAFKA_", "PN_RABBIT_", "PN_POSTGRES_", "PN_READER_",
                  "PN_BROKER_ADMIN_")
#: The variable a ``.env`` statement sets (``export`` allowed, as python-dotenv reads it).
_STATEMENT_KEY = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")
#: Unknown names already warned about in this process (at most the environment's
#: and the .env file's size): each once, from whichever source came first.
_warned: set[str] = set()


def unknown_lines(names: Iterable[tuple[str, str]], known: Sequence[str]) -> list[str]:
    """A warning line for each ``(name, where)`` that is a ``PN_*`` name nothing
    reads and not yet warned about; ``where`` begins the line. Other names are other
    tools' (the environment is shared, a ``.env`` may be too): never warned about."""
    lines = []
    for name, where in names:
        var = name.upper()  # pydantic-settings matches names case-insensitively
        if (not var.startswith("PN_") or var in _warned or var in known
                or var in OTHER_VARIABLES or var.startswith(OTHER_PREFIXES)):
            continue
        _warned.add(var)
        close = difflib.get_close_matches(var, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else "see the README's settings table"
        lines.append(f"{where}{name} is not a partition-notify setting and is ignored; {hint}")
    return lines


def env_file_keys(path: Path, encoding: str | None,
                  known: Collection[str] = ()) -> list[tuple[int, str]]:
    """``(line number, key)`` of each assignment in the ``.env`` file at ``path``,
    parsed as pydantic-settings parses it (python-dotenv); none if it is missing or
    unreadable (loading the settings then says why). A statement python-dotenv cannot
    parse that sets one of the ``known`` variables raises ConfigurationError: skipped
    (with python-dotenv's own warning), its setting fell back to the default, e.g. the
    store ``./partition-notify.db``, which ``serve`` would create and serve."""
    from dotenv.parser import parse_stream

    try:
        with path.open(encoding=encoding) as stream:
            bindings = list(parse_stream(stream))
    except (OSError, UnicodeDecodeError):
        return []
    keys = []
    for binding in bindings:
        # A binding's line is where its leading blank lines start, not its key's.
        text = binding.original.string
        line = binding.original.line + text[:len(text) - len(text.lstrip())].count("\n")
        if binding.key is not None:
            keys.append((line, binding.key))
        elif (name := _STATEMENT_KEY.match(text)) and name[1].upper() in known:
            raise ConfigurationError(
                f"{path}:{line}: {name[1].upper()} cannot be read: expected KEY=VALUE, a "
                "quoted value closed on its line with nothing after the closing quote but "
                "a # comment")
    return keys
