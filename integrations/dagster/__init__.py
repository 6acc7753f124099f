"""Dagster integration (``pip install partition-notify[dagster]``): :mod:`.sensors`."""
