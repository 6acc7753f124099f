#!/usr/bin/env bash
# The whole test suite: set up .venv, start ActiveMQ, the Kafka-protocol
# broker (tansu), RabbitMQ's STOMP plugin and PostgreSQL if they are not
# running, run lint, types and pytest, then stop what this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/bootstrap_sched.sh
bash scripts/bootstrap_spark35.sh
bash scripts/bootstrap_rest.sh
started=0
cleanup() { [ "$started" = 1 ] && bash scripts/services.sh down || true; }
trap cleanup EXIT
PN_PYTHON="$PWD/.venv/bin/python" bash scripts/services.sh up
started=1
eval "$(bash scripts/services.sh env)"
echo "== ruff" && .venv/bin/ruff check .
echo "== mypy --strict" && .venv/bin/python scripts/typecheck_tree.py && .venv/bin/mypy
# Four pytest runs; each runs even if an earlier one failed, and the script
# fails if any did. The Spark commit protocol needs its jar and settings when
# the JVM starts, so it gets its own process (its own SparkSession), once on
# PySpark 4 and once on PySpark 3.5 (the same jar); Airflow and Dagster live in
# their own venv.
rc=0
echo "== pytest"
.venv/bin/python -m pytest --ignore=tests/integrations --ignore=tests/spark_protocol "$@" || rc=1
echo "== pytest: Spark commit protocol (its own Spark session)"
.venv/bin/python -m pytest tests/spark_protocol || rc=1
echo "== pytest: Spark commit protocol on PySpark 3.5 (its own venv)"
"${PN_SPARK35_VENV:-.venv-spark35}/bin/python" -m pytest tests/spark_protocol || rc=1
echo "== pytest: Airflow and Dagster (their own venv)"
"${PN_SCHED_VENV:-.venv-sched}/bin/python" -m pytest tests/integrations || rc=1
exit "$rc"
