"""Roles of HTTP API tokens (a leaf module: the CLI imports it at start-up)."""

#: In increasing power: each includes the ones before it.
ROLES = ("read", "write", "admin")
