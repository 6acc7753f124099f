#!/usr/bin/env bash
# Test services (ActiveMQ, tansu, RabbitMQ STOMP, PostgreSQL): up|down|status|env|verify, see tests/support/services.py.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"; PY="${PN_PYTHON:-$ROOT/.venv/bin/python}"; [ -x "$PY" ] || PY=python3
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m tests.support.services "$@"
