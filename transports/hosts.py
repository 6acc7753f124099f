"""The host list of a broker URL: ``host[:port][,host[:port]...]``, shared by STOMP and Kafka.

IPv6 addresses go in brackets (``[::1]:61613``); a host without a port gets
the scheme's default port. Every error names the URL kind, the offending
item and what was expected.
"""

from __future__ import annotations

from partition_notify.core.errors import ConfigurationError

Host = tuple[str, int]


def parse_hosts(hostlist: str, *, default_port: int, kind: str, example: str) -> tuple[Host, ...]:
    """``(host, port)`` pairs from the netloc's host part (userinfo already removed).

    ``kind`` names the URL in errors ("STOMP", "Kafka"); ``example`` is a
    well-formed URL shown when no host is given. IPv6 hosts come back without
    their brackets.
    """
    hosts = tuple(_one(item, default_port, kind) for item in hostlist.split(",") if item)
    if not hosts:
        raise ConfigurationError(f"{kind} URL names no host; expected {example}")
    return hosts


def _one(item: str, default_port: int, kind: str) -> Host:
    if item.startswith("["):  # [::1]:61613
        host, closed, rest = item[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ConfigurationError(f"{kind} URL host {item!r}: expected [IPv6 address]:port")
        port = rest.removeprefix(":")
    elif item.count(":") > 1:
        raise ConfigurationError(f"{kind} URL host {item!r}: an IPv6 address goes in brackets, "
                                 f"e.g. [{item}] or [::1]:{default_port}")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise ConfigurationError(f"{kind} URL host {item!r} has no host name")
    if not port:
        return host, default_port
    try:
        number = int(port)
    except ValueError:
        raise ConfigurationError(f"{kind} URL host {item!r}: port {port!r} is not a number"
                                 ) from None
    if not 1 <= number <= 65535:
        raise ConfigurationError(f"{kind} URL host {item!r}: port {number} is not in 1-65535")
    return host, number
