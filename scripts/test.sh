#!/usr/bin/env bash
# The whole test suite: set up .venv, start ActiveMQ, the Kafka-protocol
# broker (tansu), RabbitMQ's STOMP plugin and PostgreSQL if they are not
# running, run lint, types and pytest, then stop what this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/bootstrap_sched.sh
started=0
cleanup() { [ "$started" = 1 ] && bash scripts/services.sh down || true; }
trap cleanup EXIT
PN_PYTHON="$PWD/.venv/bin/python" bash scripts/services.sh up
started=1
eval "$(bash scripts/services.sh env)"
echo "== ruff" && .venv/bin/ruff check partition_notify store publisher transports subscriber writers integrations
echo "== mypy --strict" && .venv/bin/mypy
echo "== pytest"
.venv/bin/python -m pytest --ignore=tests/integrations "$@"
echo "== pytest: Airflow and Dagster (their own venv)"
"${PN_SCHED_VENV:-.venv-sched}/bin/python" -m pytest tests/integrations
