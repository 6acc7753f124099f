"""Keep credentials out of messages and logs."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

#: Query parameters that carry a secret: libpq's (``password``, ``sslpassword``,
#: ``oauth_client_secret``, ``scram_client_key``) and the usual spellings elsewhere.
_SECRET_PARAM = re.compile(r"(?i)([?&;][a-z_]*(?:password|passwd|secret|token|_key))=[^&;#]*")


#: What a user name before the password's ``:`` cannot hold unencoded.
_NOT_IN_USER = re.compile(r"[/?#]")


def redact_url(url: str) -> str:
    """``url`` with any password, in its userinfo or its query, replaced by ``***``."""
    url = _SECRET_PARAM.sub(r"\1=***", url)
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        # The password runs to the *last* "@": urlsplit ends the authority at the
        # first "/", "?" or "#", and would print the rest of a password holding one
        # unencoded (SQLAlchemy connects with such URLs). An "@" later in a query
        # makes this hide more than the password, never less.
        userinfo, _, host = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        if colon and not _NOT_IN_USER.search(user):
            return f"{scheme}://{user}:***@{host}"
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        # Unparseable (e.g. "stomp://[::1"): hide any userinfo wholesale.
        scheme, sep, rest = url.partition("://")
        return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}" if "@" in rest else url
    if password is None:
        return url  # as given: urlunsplit would drop an empty authority (sqlite:////x.db)
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
