"""Keep credentials out of messages and logs."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages and logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        # Unparseable (e.g. "stomp://[::1"): hide any userinfo wholesale.
        scheme, sep, rest = url.partition("://")
        return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}" if "@" in rest else url
    if password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
